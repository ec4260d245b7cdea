"""Records a catch-up read past how far it may apply them, kept until it may.

A receiver applies a partition's records only up to T1 (the old owner's committed offset),
or F once the old owner released it. Its consumer keeps fetching past that point, and the
records it reads there wait here, in order, instead of being dropped and fetched again: when
RELEASE arrives, the records up to F are already in memory and the receiver can take the
partition over at once.

Each partition keeps at most ``capacity`` records, and all of them at most ``max_bytes`` of
keys and values; a partition whose record is not kept is paused by the caller, and read again
(from the catch-up's position) once its records were taken.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping

from framework.kafka import KafkaConsumer, Message
from rebalance.positions import Position

__all__ = ["PausedReads", "ReadAhead"]


class PausedReads:
    """The partitions a catch-up's ``consumer`` stopped fetching: it keeps enough of their
    records already, or what comes next is never applied."""

    def __init__(self, consumer: KafkaConsumer) -> None:
        self._consumer = consumer
        self._paused: set[Position] = set()
        #: per partition paused for good, the offset of the record fetched past its limit
        self.beyond: dict[Position, int] = {}

    def __contains__(self, position: object) -> bool:
        return position in self._paused

    def holds(self, ahead: ReadAhead) -> Callable[[Position], bool]:
        """Whether a partition is paused, or ``ahead`` keeps records of it."""
        return lambda position: position in self._paused or ahead.holding(position)

    def pause(self, position: Position, beyond: int | None = None) -> None:
        """Stop fetching ``position`` (``beyond``: the offset of the record fetched past
        where it may ever be applied, when that is why)."""
        self._consumer.pause([position])
        self._paused.add(position)
        if beyond is not None:
            self.beyond.setdefault(position, beyond)

    def resume_ready(
        self,
        ahead: ReadAhead,
        limit: Callable[[Position], int | None],
        positions: Mapping[Position, int],
    ) -> None:
        """Fetch paused partitions again, from the catch-up's ``positions``, once ``ahead``
        keeps none of their records and their ``limit`` allows more."""
        for position in list(self._paused):
            if ahead.holding(position):
                continue
            allowed = limit(position)
            if allowed is None or positions[position] < allowed:
                self._consumer.seek(position, positions[position])
                self._consumer.resume([position])
                self._paused.discard(position)
                self.beyond.pop(position, None)


class ReadAhead:
    """Records read past each partition's limit, oldest first, at most ``capacity`` each and
    ``max_bytes`` (keys and values) in all."""

    def __init__(self, capacity: int, max_bytes: int = 32 << 20) -> None:
        self.capacity = max(1, capacity)
        self.max_bytes = max_bytes
        #: bytes of the keys and values kept
        self.bytes = 0
        self._held: dict[Position, deque[Message]] = {}

    def __len__(self) -> int:
        return sum(len(records) for records in self._held.values())

    def holding(self, position: Position) -> bool:
        """Whether records of ``position`` wait here (later ones must wait behind them)."""
        return position in self._held

    def hold(self, position: Position, message: Message, offset: int) -> bool:
        """Keep ``message`` (at ``offset``) of ``position``; ``False`` when the partition or
        the bytes are full and the message was not kept (the caller pauses the partition). A
        message at or below the newest kept one (fetched again) is ignored."""
        records = self._held.get(position)
        if records is not None and offset <= _offset(records[-1]):
            return True
        size = _size(message)
        full = records is not None and len(records) >= self.capacity
        if full or (self.bytes + size > self.max_bytes and self._held):
            return False
        if records is None:
            records = self._held[position] = deque()
        records.append(message)
        self.bytes += size
        return True

    def firsts(self) -> dict[Position, int]:
        """The offset of the first record kept of each partition."""
        return {position: _offset(records[0]) for position, records in self._held.items()}

    def due(self, limit: Callable[[Position], int | None], max_records: int) -> list[Message]:
        """Take out up to ``max_records`` kept records that ``limit`` (how far each partition
        may be applied now, ``None``: no limit) allows, oldest first per partition."""
        taken: list[Message] = []
        for position in list(self._held):
            records = self._held[position]
            bound = limit(position)
            while records and len(taken) < max_records:
                if bound is not None and _offset(records[0]) >= bound:
                    break
                taken.append(records.popleft())
                self.bytes -= _size(taken[-1])
            if not records:
                del self._held[position]
        return taken

    def forget(self, position: Position, start: int = 0) -> None:
        """Forget the records kept of ``position`` at or past offset ``start`` (it will
        never be applied that far)."""
        records = self._held.get(position)
        while records and _offset(records[-1]) >= start:
            self.bytes -= _size(records.pop())
        if records is not None and not records:
            del self._held[position]

    def clear(self) -> None:
        """Forget every kept record."""
        self._held.clear()
        self.bytes = 0


def _offset(message: Message) -> int:
    offset = message.offset()
    assert offset is not None  # only records with offsets are kept
    return offset


def _size(message: Message) -> int:
    return len(message.key() or b"") + len(message.value() or b"")
