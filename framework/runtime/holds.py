"""Input records an ordering gate holds back in the live loop (``framework.growth.gates``).

The first record of a partition that must wait stops that partition there: the batch keeps
the partition's records before it and drops the held one and the rest (``cut``), and the
consumer pauses the partition. Every half second the loop commits what is in flight and
checks the held records again (``recheck``); one whose gate opened is read again from its own
offset. So neither the state's nor the group's offsets pass a held record, and a processor
that stops meanwhile resumes at it. A held partition whose records are read again for another
reason (batches dropped in flight, sought back: ``release``) is no longer held: its records
come back and are judged again. Markers are never held; a tick waits for every key it could
reach (``Gates.tick_waits``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from framework.growth.gates import Gates, PositionOf, Wait
from framework.growth.markers import is_marker_record
from framework.kafka import KafkaConsumer, Message
from framework.records import readable_headers
from framework.time.ticks import is_tick_message
from rebalance import TopicHistory, key_hash
from rebalance.positions import Position

__all__ = ["Held", "Holds"]

# the processor's lines keep the loop's logger name
log = logging.getLogger("framework.runtime.loop")

#: a record to process: the message, its topic, partition and offset
Taken = tuple[Message, str, int, int]


@dataclass
class Held:
    """A partition stopped at ``offset``, whose record there (of key hash ``h``, or a
    ``tick``) waits (``wait``)."""

    offset: int
    h: int | None
    wait: Wait
    tick: bool = False


class Holds:
    """The partitions processor ``processor``'s ``consumer`` holds at a record, and the gates
    of the input topics (``histories``)."""

    def __init__(
        self, processor: int, consumer: KafkaConsumer, histories: Mapping[str, TopicHistory]
    ) -> None:
        self.processor = processor
        self._consumer = consumer
        self.gates = Gates(histories)
        self.held: dict[Position, Held] = {}

    def reasons(self, position: PositionOf) -> dict[Position, str]:
        """Why each held partition waits (``position``: where partitions are read up to)."""
        return {
            where: f"held at offset {held.offset}: "
            + held.wait.reason(position((where[0], held.wait.source)))
            for where, held in self.held.items()
        }

    def cut(self, records: list[Taken], position: PositionOf) -> list[Taken]:
        """``records`` (one batch, in order) less those of held partitions: a record that
        must wait now holds its partition (paused) from there on."""
        gates, held = self.gates, self.held
        kept: list[Taken] = []
        gated: dict[Position, int] = {}  # partitions whose records a gate may hold, read to
        for record in records:
            message, topic, partition, offset = record
            where = (topic, partition)
            if where in held:
                continue  # read again from the held record once it may be read
            if gates.pending(topic, partition, offset):
                tick = is_tick_message(topic, message)  # (keyless, or a compacted topic's)
                h = None if tick else _key_hash(message, topic)
                wait = self._waits(where, offset, h, tick, position)
                if wait is not None:
                    self._hold(where, Held(offset, h, wait, tick), position)
                    continue
                gated[where] = offset
            kept.append(record)
        for (topic, partition), offset in gated.items():
            gates.settle(topic, partition, offset, position)  # gates met: no longer asked
        return kept

    def _waits(
        self, where: Position, offset: int, h: int | None, tick: bool, position: PositionOf
    ) -> Wait | None:
        """What the record at ``where`` and ``offset`` (of key hash ``h``, or a ``tick``)
        waits for (``None``: nothing)."""
        if tick:
            return self.gates.tick_waits(*where, offset, position)
        return self.gates.waits(*where, offset, h, position)

    def _hold(self, where: Position, held: Held, position: PositionOf) -> None:
        """Stop reading ``where`` at ``held``'s record."""
        self._consumer.pause([where])
        self.held[where] = held
        log.info(
            "processor %d: %s[%d] is held back at offset %d: %s",
            self.processor,
            *where,
            held.offset,
            held.wait.reason(position((where[0], held.wait.source))),
        )

    def recheck(self, position: PositionOf) -> None:
        """Read on each held partition whose record may be read now, from that record (call
        it with no batch in flight: ``position`` then says what is applied)."""
        for where, held in list(self.held.items()):
            wait = self._waits(where, held.offset, held.h, held.tick, position)
            if wait is not None:
                held.wait = wait
                continue
            del self.held[where]
            self._consumer.seek(where, held.offset)
            self._consumer.resume([where])
            log.info("processor %d: %s[%d] read on at %d", self.processor, *where, held.offset)

    def release(self, positions: Iterable[Position]) -> None:
        """Stop holding ``positions`` whose fetch position the caller set back (to records
        before the held one): they are fetched again, and judged again."""
        released = [where for where in positions if self.held.pop(where, None) is not None]
        if released:
            self._consumer.resume(released)

    def forget(self, positions: Iterable[Position]) -> None:
        """Stop holding ``positions`` the consumer no longer reads."""
        for where in positions:
            self.held.pop(where, None)


def _key_hash(message: Message, topic: str) -> int | None:
    """The hash of ``message``'s key; ``None`` for a marker (never held), keyless or with its
    id as key (a compacted topic's)."""
    key = message.key()
    if key is None:
        return None
    if key.startswith(f"{topic}/".encode()):  # (cheap: a marker's key is its id)
        headers = readable_headers(message)
        if headers is not None and is_marker_record(topic, key, headers):
            return None
    return key_hash(key)
