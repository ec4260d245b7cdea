"""The ticks a processor writes: recorded progress of time in the input partitions it owns.

Keys that get no records still need time to pass (``framework.time.ticks``). For an app that
keeps time, the processor considers each input partition it owns and reads live (no ordering
gate holds it, no rebuild below the group's offsets reads it, no shrink deleted it) at most
every ``time.tick_interval`` of its clock, and decides:

- **floor**: the largest event time read from the partition (its records' and its ticks'),
  as the batches that read them committed it with the partition's offset
  (``framework.time.applying.FLOOR_SCOPE``), so a restart goes on from it; unknown until one
  is read (a state rebuilt elsewhere, e.g. from another processor's snapshot, may lack it):
  then ``NO_FLOOR``, which moves no key's time;
  with ``time.idle_after`` set and no record read from the partition for that long, at least
  the wall clock minus ``idle_after``;
- **wall**: the wall clock.

It appends a tick ``{"floor", "wall", "app", "steps"}`` (naming its app: another app reading
the partition passes it over; ``steps``: how many steps of the topic's partition history its
view of the registry holds, which every reader judges the tick by) to the partition (an
explicit partition; on a compacted topic with a key of its own, ``tick_key``) only when a
key living there has something due by them (``StateBatch.due_keys``,
``PlacementCheck.lives_at``), and only when
no earlier tick it wrote there is still unread: it never floods a partition. The tick goes
into the batch's transaction (the producer that writes its outputs, so a fenced processor
cannot write one) and takes effect only where it lands: every reader, this processor too,
applies it when it reads it there.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from framework.clock import Clock
from framework.config_time import TimeConfig
from framework.coordination.registry import TopicEntry
from framework.errors import SplitstateError
from framework.kafka import (
    DeliveryError,
    KafkaProducer,
    Message,
    TransactionAbortableError,
    UnknownPartitionError,
)
from framework.order.marks import NO_FLOOR
from framework.processing import RecordProcessor
from framework.time.applying import FLOOR_SCOPE, TimeApplier
from framework.time.ticks import tick_headers, tick_key
from rebalance.positions import Position
from statestore import ProcessorDatabase, StateBatch
from statestore.due_index import DUE_STORE, decode_due

__all__ = [
    "NO_FLOOR",
    "Reading",
    "Tick",
    "TickWriter",
    "produce_tick",
    "tick_floor",
    "tickable",
    "write_ticks",
]

log = logging.getLogger(__name__)

_FLUSH_SECONDS = 60.0
#: a tick handed to the producer, its offset not reported yet
_UNREPORTED = -1


class TickHomes(Protocol):
    """Which keys a tick applies to, and how many history steps a topic's view has
    (``PlacementCheck``'s)."""

    def lives_at(self, key: bytes, where: tuple[str, int, int], steps: int | None, /) -> bool:
        """Whether a tick at ``where`` written knowing ``steps`` steps applies to ``key``."""

    def known_steps(self, topic: str, /) -> int:
        """How many steps of ``topic``'s partition history the view has."""


class _Layout(Protocol):
    @property
    def inputs(self) -> Mapping[str, TopicEntry]:
        """The input topics' registry entries."""
        ...


class Reading(Protocol):
    """What ticks are decided from of the partitions a processor reads (its
    ``framework.runtime.assignment.Assignment``)."""

    @property
    def flowing(self) -> set[Position]:
        """The partitions read that no ordering gate holds."""
        ...

    @property
    def restore_below(self) -> Mapping[Position, int]:
        """Partitions rebuilt without output below these offsets."""
        ...

    @property
    def layout(self) -> _Layout:
        """The input topics as the registry has them now."""
        ...


@dataclass(frozen=True)
class Tick:
    """A tick to append to ``topic[partition]`` (``key``: a compacted topic's; ``steps``:
    the steps of the topic's history its writer knew)."""

    topic: str
    partition: int
    floor: int
    wall: int
    key: bytes | None = None
    steps: int | None = None


def tick_floor(read: int | None, quiet_ms: float, idle_ms: int | None, now_ms: int) -> int:
    """A partition's floor: the largest event time ``read`` from it (``None``: none yet),
    or, with ``idle_ms`` set and no record read for ``quiet_ms`` >= it, at least the wall
    clock ``now_ms`` less ``idle_ms``; ``NO_FLOOR`` when neither says anything."""
    floor = NO_FLOOR if read is None else read
    if idle_ms is not None and quiet_ms >= idle_ms:
        floor = max(floor, now_ms - idle_ms)
    return floor


def tickable(reading: Reading, offsets: Callable[[Position], int]) -> dict[Position, int]:
    """The partitions a processor may tick now, each with its next offset (``offsets``):
    those it reads with no gate holding them, past any rebuild (``restore_below``), that no
    shrink deleted (a partition at or above its topic's count)."""
    inputs, bounds = reading.layout.inputs, reading.restore_below
    found: dict[Position, int] = {}
    for position in reading.flowing:
        topic, partition = position
        entry = inputs.get(topic)
        if entry is None or partition >= entry.partitions:
            continue
        offset = offsets(position)
        bound = bounds.get(position)
        if bound is None or offset >= bound:
            found[position] = offset
    return found


class TickWriter:
    """Decides and writes one processor's ticks (see the module). ``timing``: what the
    processor read of its partitions' time; ``homes``: its ``PlacementCheck``;
    ``reading`` the partitions it reads, ``database`` its state; ``clock`` the run's."""

    def __init__(
        self,
        settings: TimeConfig,
        timing: TimeApplier,
        homes: TickHomes,
        *,
        reading: Reading,
        database: ProcessorDatabase,
        clock: Clock,
    ) -> None:
        self._interval = settings.tick_seconds
        self._idle_ms = settings.idle_ms
        self._timing = timing
        self._homes = homes
        self._reading = reading
        self._database = database
        self._clock = clock
        #: when each partition was last considered, on the monotonic clock
        self._considered: dict[Position, float] = {}
        #: each partition's count of keyed records read when last looked, and since when
        self._seen: dict[Position, tuple[int, float]] = {}
        #: the next offset of each partition as this writer's batches applied it
        self._applied: dict[Position, int] = {}
        #: the offset of the tick this writer wrote to a partition and has not read yet
        self._unread: dict[Position, int] = {}
        #: ticks handed to the producer
        self.written = 0
        timing.restore_floors(database.progress(FLOOR_SCOPE))  # what it read before a restart

    @classmethod
    def of(
        cls,
        settings: TimeConfig,
        records: RecordProcessor,
        reading: Reading,
        database: ProcessorDatabase,
        clock: Clock,
    ) -> TickWriter | None:
        """The writer of a processor applying ``records`` (``None``: its app keeps no time)."""
        timing = records.timing
        if timing is None:
            return None
        placement = records.placement
        return cls(settings, timing, placement, reading=reading, database=database, clock=clock)

    def due(self) -> bool:
        """Whether a partition the processor reads is due to be considered."""
        now = self._clock.monotonic()
        considered = self._considered
        return any(
            now - considered.get(position, float("-inf")) >= self._interval
            for position in self._reading.flowing
        )

    def decide(self, batch: StateBatch, next_offsets: Mapping[Position, int]) -> list[Tick]:
        """The ticks to write with ``batch`` (which applied records up to ``next_offsets``)."""
        for position, offset in next_offsets.items():
            self._applied[position] = max(offset, self._applied.get(position, 0))
        stored = self._database.offsets()
        applied = self._applied

        def offset_of(position: Position) -> int:
            return max(applied.get(position, 0), stored.get(position, 0))

        now = self._clock.monotonic()
        wall = int(self._clock.time() * 1000)
        ticks: list[Tick] = []
        for position, offset in sorted(tickable(self._reading, offset_of).items()):
            quiet = self._quiet(position, now)
            if now - self._considered.get(position, float("-inf")) < self._interval:
                continue
            self._considered[position] = now
            unread = self._unread.get(position)
            if unread is not None:
                if unread == _UNREPORTED or offset <= unread:
                    continue  # the last one is still to be read: no flood
                del self._unread[position]
            read = self._timing.floors.get(position)
            floor = tick_floor(read, quiet * 1000, self._idle_ms, wall)
            steps = self._homes.known_steps(position[0])
            if self._something_due(batch, (*position, offset), floor, wall, steps):
                ticks.append(self._tick(position, floor, wall, steps))
        return ticks

    def send(
        self,
        producer: KafkaProducer,
        ticks: Iterable[Tick],
        on_delivery: Callable[[DeliveryError | None, Message], None] | None = None,
    ) -> int:
        """Hand ``ticks`` to ``producer`` without waiting (``on_delivery`` is told of each
        too); returns how many. A partition a growth added that the producer does not know
        yet is looked up once; still unknown, its tick is left out (decided again later)."""
        count = 0
        for tick in ticks:
            report = self._reporter(on_delivery)
            headers = self.headers(tick)
            try:
                produce_tick(producer, tick, headers, report)
            except UnknownPartitionError:
                if producer.partition_count(tick.topic) <= tick.partition:
                    where = f"{tick.topic}[{tick.partition}]"
                    log.info("no tick to %s yet: its producer does not know it", where)
                    continue
                produce_tick(producer, tick, headers, report)
            self._unread[(tick.topic, tick.partition)] = _UNREPORTED
            count += 1
        self.written += count
        return count

    def headers(self, tick: Tick) -> list[tuple[str, bytes]]:
        """The headers ``tick`` is written with: its times, this processor's app, and the
        history steps its view knew."""
        return tick_headers(tick.floor, tick.wall, self._timing.app_id, steps=tick.steps)

    def write(self, producer: KafkaProducer, ticks: list[Tick], *, transactional: bool) -> None:
        """Produce ``ticks`` and wait for Kafka (raising, inside a transaction
        ``TransactionAbortableError``, when one was not written)."""
        if ticks:
            send = lambda report: self.send(producer, ticks, report)  # noqa: E731
            write_ticks(producer, send, "ticks", transactional, failed=self.dropped)

    def dropped(self) -> None:
        """The ticks written may not be there (their transaction aborted, their batch
        failed): none of them is waited for; the floors are the committed batches' again
        (those dropped are read again)."""
        self._unread.clear()
        self._timing.restore_floors(self._database.progress(FLOOR_SCOPE), replace=True)

    # -- internals ---------------------------------------------------------------------------

    def _quiet(self, position: Position, now: float) -> float:
        """Seconds since a keyed record of ``position`` was last read (since it was first
        looked at, when none was)."""
        count = self._timing.records.get(position, 0)
        seen = self._seen.get(position)
        if seen is None or seen[0] != count:
            self._seen[position] = seen = (count, now)
        return now - seen[1]

    def _something_due(
        self,
        batch: StateBatch,
        where: tuple[str, int, int],
        floor: int,
        wall: int,
        steps: int | None = None,
    ) -> bool:
        """Whether a key a tick at ``where`` written knowing ``steps`` history steps applies
        to has something due by ``floor`` or ``wall`` (each candidate's stored due times
        read again: the index may name one that moved)."""
        due = batch.store(DUE_STORE)
        for key in batch.due_keys(floor, wall):
            raw = due.get(key)
            if raw is None:
                continue
            event, processing = decode_due(raw)
            if (event <= floor or processing <= wall) and self._homes.lives_at(key, where, steps):
                return True
        return False

    def _tick(self, position: Position, floor: int, wall: int, steps: int) -> Tick:
        topic, partition = position
        entry = self._reading.layout.inputs[topic]
        key = tick_key(topic, uuid.uuid4().hex) if entry.compacted else None
        return Tick(topic, partition, floor, wall, key, steps)

    def _reporter(
        self, also: Callable[[DeliveryError | None, Message], None] | None
    ) -> Callable[[DeliveryError | None, Message], None]:
        def report(error: DeliveryError | None, message: Message) -> None:
            topic, partition, offset = message.topic(), message.partition(), message.offset()
            if topic is not None and partition is not None:
                if error is None and offset is not None:
                    self._unread[(topic, partition)] = offset
                else:
                    self._unread.pop((topic, partition), None)
            if also is not None:
                also(error, message)

        return report


def produce_tick(
    producer: KafkaProducer,
    tick: Tick,
    headers: list[tuple[str, bytes]],
    report: Callable[[DeliveryError | None, Message], None] | None,
) -> None:
    """Produce ``tick`` with ``headers`` (waiting for room in the producer's queue)."""
    while True:
        try:
            producer.produce(
                tick.topic,
                b"",  # (not None: with a key, that would be a tombstone)
                tick.key,
                tick.partition,
                headers=headers,
                on_delivery=report,
            )
            return
        except BufferError:
            producer.poll(0.1)


def write_ticks(
    producer: KafkaProducer,
    send: Callable[[Callable[[DeliveryError | None, Message], None]], object],
    what: str,
    transactional: bool,
    *,
    failed: Callable[[], None] = lambda: None,
) -> None:
    """``send`` ticks (called with the delivery report to give each) and wait for Kafka;
    when one was not written, call ``failed`` and raise (inside a transaction
    ``TransactionAbortableError``); ``what``: how the error names them."""
    errors: list[DeliveryError] = []

    def delivered(error: DeliveryError | None, _message: Message) -> None:
        if error is not None:
            errors.append(error)

    send(delivered)
    remaining = producer.flush(_FLUSH_SECONDS)
    if remaining or errors:
        failed()
        text = f"{what} could not be written ({remaining} unsent; errors: {errors[:3]})"
        if transactional:
            raise TransactionAbortableError(f"{text}; the transaction is aborted")
        raise SplitstateError(f"{text}; the batch is processed again after a restart")
