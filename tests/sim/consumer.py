"""``MemoryConsumer``: the port's ``read_committed`` consumer over a simulated broker
(assigned partitions only)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from framework.kafka import Isolation, KafkaConsumer, KafkaIOError, Message
from rebalance.positions import OffsetRange, Position
from tests.sim.producer import SimMessage

if TYPE_CHECKING:
    from tests.sim.broker import StoredRecord
    from tests.sim.kafka import MemoryKafka

__all__ = ["MemoryConsumer"]


class MemoryConsumer(KafkaConsumer):
    """A consumer of ``kafka``'s broker in group ``group_id``; ``reset``: ``earliest``,
    ``latest`` or ``error`` for a position the log does not hold; ``isolation``: what it
    reads (``read_uncommitted``: open and aborted transactions' records too, up to the high
    watermark)."""

    def __init__(
        self,
        kafka: MemoryKafka,
        group_id: str,
        reset: str,
        name: str,
        isolation: Isolation = "read_committed",
    ) -> None:
        self._kafka = kafka
        self.group_id = group_id
        self._reset = reset
        self._name = name
        self._committed = isolation == "read_committed"
        #: position -> next offset to fetch (``None``: the log's start)
        self._positions: dict[Position, int | None] = {}
        #: position -> offset after the last record consumed since its assign or seek (what
        #: ``position`` reports; librdkafka knows none before a record is consumed)
        self._consumed: dict[Position, int] = {}
        self._paused: set[Position] = set()
        self._turn = 0
        self.closed = False

    def _call(self, operation: str) -> str | None:
        if self.closed:
            raise KafkaIOError(f"{self._name}: the consumer is closed")
        return self._kafka.before(f"consumer.{operation}")

    def assign(self, starts: Mapping[Position, int | None]) -> None:
        """Read exactly these partitions."""
        self._call("assign")
        self._positions = dict(starts)
        self._paused &= set(starts)
        self._consumed.clear()

    def add(self, starts: Mapping[Position, int | None]) -> None:
        """Also read these partitions (librdkafka refuses one already assigned)."""
        self._call("add")
        for topic, partition in starts:
            if (topic, partition) in self._positions:
                raise KafkaIOError(
                    f"{self._name}: {topic} [{partition}] is already part of the current assignment"
                )
        self._positions.update(starts)

    def remove(self, positions: Iterable[Position]) -> None:
        """Stop reading these partitions (librdkafka refuses one not assigned)."""
        self._call("remove")
        wanted = list(positions)
        for topic, partition in wanted:
            if (topic, partition) not in self._positions:
                raise KafkaIOError(
                    f"{self._name}: {topic} [{partition}] can't be unassigned since it is not "
                    "in the current assignment"
                )
        for position in wanted:
            del self._positions[position]
            self._consumed.pop(position, None)
            self._paused.discard(position)

    def consume(self, max_records: int, timeout: float) -> list[Message]:
        """Up to ``max_records`` records; waits ``timeout`` once when none is there."""
        self._call("consume")
        records = self._fetch(self._kafka.faults.fetch(max_records))
        if not records and timeout > 0:
            self._kafka.clock.sleep(timeout)
            if self.closed:
                return []
            records = self._fetch(self._kafka.faults.fetch(max_records))
        for watcher in self._kafka.broker.fetch_watchers:
            watcher(self._kafka.name, self._name, records)
        return [SimMessage(record) for record in records]

    def _fetch(self, max_records: int) -> list[StoredRecord]:
        paused = self._paused
        live = [p for p in self._positions if p not in paused] if paused else [*self._positions]
        if not live or not max_records:
            return []
        topics = self._kafka.broker.topics
        faults = self._kafka.faults
        out: list[StoredRecord] = []
        self._turn += 1
        turn = self._turn % len(live)
        for position in live[turn:] + live[:turn]:
            if len(out) >= max_records:
                break
            name, index = position
            if faults.starved(name):
                continue
            topic = topics.get(name)
            if topic is None or len(topic.partitions) <= index:
                continue  # not there yet (metadata): nothing to read
            log = topic.partitions[index]
            offset = self._positions[position]
            if offset is None:
                offset = log.start
            if offset < log.start or offset > log.end:
                if self._reset == "error":
                    raise self._kafka.reset_error(position, offset)
                offset = log.start if self._reset == "earliest" else self._end(position)
            passed, found = self._read(position, offset, max_records - len(out))
            if not passed:
                self._positions[position] = offset
                continue  # (nothing passed: nothing found either)
            out.extend(found)
            self._positions[position] = passed[-1].offset + 1
            ends = [r.offset + 1 for r in passed if r.marker is not None] + [
                r.offset + 1 for r in found
            ]
            if ends:
                self._consumed[position] = max(ends)
        return out

    def _read(
        self, position: Position, offset: int, wanted: int
    ) -> tuple[list[StoredRecord], list[StoredRecord]]:
        """What a ``read_committed`` fetch of ``position`` from ``offset`` passes (records,
        markers and aborted records below the last stable offset, up to the ``wanted``-th
        record it returns) and the records it returns: those of no transaction or of a
        committed one (``read_uncommitted``: below the high watermark, every record but the
        markers). A consumed marker moves the position past it (librdkafka)."""
        stable = self._end(position)
        if offset >= stable:
            return [], []  # nothing below the end to read (the faults cut nothing of nothing)
        broker = self._kafka.broker
        log = broker.partition(position)
        passed: list[StoredRecord] = []
        found: list[StoredRecord] = []
        batch = max(wanted, 16)
        while len(found) < wanted:
            chunk = log.from_offset(passed[-1].offset + 1 if passed else offset, batch)
            chunk = [record for record in chunk if record.offset < stable]
            if not chunk:
                break
            for record in chunk:
                if len(found) >= wanted:
                    break
                passed.append(record)
                if broker.visible(record) if self._committed else record.marker is None:
                    found.append(record)
        kept = self._kafka.faults.cut(position[0], found)
        if len(kept) < len(found):  # cut short: the fetch ends at the last record kept
            last = kept[-1].offset if kept else offset - 1
            passed = [record for record in passed if record.offset <= last]
        return passed, kept

    def _end(self, position: Position) -> int:
        """Where this consumer's reads of ``position`` end now: the last stable offset
        (``read_committed``) or the high watermark."""
        broker = self._kafka.broker
        return broker.stable_offset(position) if self._committed else broker.end_offset(*position)

    def seek(self, position: Position, offset: int) -> None:
        """Read ``position`` from ``offset`` on."""
        self._call("seek")
        if position not in self._positions:
            raise KafkaIOError(f"{self._name}: seek on unassigned {position}")
        self._positions[position] = offset
        self._consumed.pop(position, None)

    def pause(self, positions: Iterable[Position]) -> None:
        """Stop fetching these."""
        self._call("pause")
        self._paused |= set(positions) & set(self._positions)

    def resume(self, positions: Iterable[Position]) -> None:
        """Fetch these again."""
        self._call("resume")
        self._paused -= set(positions)

    def position(self, position: Position) -> int | None:
        """The offset after the last record consumed (``None`` before one was consumed
        since the partition was assigned or sought)."""
        self._call("position")
        return self._consumed.get(position)

    def committed(self, positions: Iterable[Position]) -> dict[Position, int]:
        """The group's committed offsets."""
        self._call("committed")
        group = self._kafka.broker.groups.get(self.group_id, {})
        return {p: group[p] for p in positions if p in group}

    def commit(self, offsets: Mapping[Position, int], *, asynchronous: bool = False) -> None:
        """Commit these next offsets to the group."""
        after = self._call("commit") == "after"
        broker = self._kafka.broker
        for position in offsets:
            broker.partition(position)  # UnknownPartitionError for a missing one
        broker.groups.setdefault(self.group_id, {}).update(offsets)
        if after and not asynchronous:
            raise KafkaIOError(f"{self._name}: commit timed out (it was written)")

    def watermarks(self, positions: Iterable[Position]) -> dict[Position, OffsetRange]:
        """``[start, last stable offset)`` of each partition (``read_committed``; the high
        watermark for ``read_uncommitted``)."""
        self._call("watermarks")
        return self._kafka.watermarks_of(positions, self._committed)

    def fetched_ends(self, positions: Iterable[Position]) -> dict[Position, int]:
        """The high watermark of each partition, markers and open transactions included
        (librdkafka's cached one; the simulated fetches see the log as it is)."""
        broker = self._kafka.broker
        return {p: broker.partition(p).end for p in positions}

    def group_metadata(self) -> object:
        """The group's id (all a simulated transaction needs)."""
        return self.group_id

    def close(self) -> None:
        """Leave."""
        if not self.closed:
            self._call("close")
        self.closed = True
