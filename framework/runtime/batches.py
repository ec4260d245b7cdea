"""One polled batch, from records to committed state (steps 2-4 of the runtime's loop).

``BatchRunner.run`` runs the processor function on each record (guarded against records that
kill the process, see ``framework.runtime.crashes``), writes the outputs and dead letters to Kafka
and waits for them (``framework.runtime.delivery``), then commits the state changes and the next
input offsets as one RocksDB write. Outputs are acknowledged before the state commits: a
crash before the commit repeats the batch's outputs, never its state changes.

Under exactly-once the outputs, the dead letters and the group's next offsets go into one Kafka
transaction, committed before the RocksDB write: a crash before the transaction commits shows
nothing of the batch (it is processed again); a crash after it, before the RocksDB write, leaves
the group's offsets ahead of the state, and the restart rebuilds that gap without output.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from operator import itemgetter

from framework.clock import Clock
from framework.config import AppConfig
from framework.coordination.registry import TopicEntry
from framework.errors import SplitstateError
from framework.growth.compaction_writes import CompactionTombstones
from framework.growth.lease import RegistryLease
from framework.kafka import (
    KafkaConsumer,
    KafkaProducer,
    Message,
    ProducerFencedError,
    TransactionalProducer,
)
from framework.processing import (
    DeadLetter,
    EncodedOutput,
    ProcessorStoppedError,
    RecordProcessor,
)
from framework.runtime.assignment import Assignment
from framework.runtime.crashes import CrashGuard
from framework.runtime.delivery import BatchWriter
from framework.runtime.forced_ticks import write_forced_ticks
from framework.runtime.growth_bases import GrowthBases
from framework.runtime.keys_of_mine import keys_of_mine
from framework.runtime.ordering import input_order_of
from framework.runtime.record_limits import RecordLimits
from framework.runtime.recovery import committable
from framework.runtime.tick_guard import guarded_tick, lone_ticks
from framework.runtime.ticking import Tick, TickWriter
from framework.runtime.transactions import TRANSACTION_SECONDS, abort_quietly, fenced
from framework.time.rederive import rederive_due
from framework.time.ticks import is_tick_message
from rebalance.positions import Position
from statestore import ProcessorDatabase, StateBatch

__all__ = ["BatchResult", "BatchRunner", "coordinates", "first_offsets"]

log = logging.getLogger(__name__)

Where = tuple[str, int, int]
#: a taken record's ``(topic, partition)`` (counted per batch in C, not per record in Python)
_POSITION = itemgetter(1, 2)


def coordinates(message: Message) -> Where:
    """``(topic, partition, offset)`` of a consumed record."""
    topic, partition, offset = message.topic(), message.partition(), message.offset()
    if topic is None or partition is None or offset is None:
        raise SplitstateError("Kafka delivered a record without topic, partition or offset")
    return topic, partition, offset


def first_offsets(messages: Iterable[Message]) -> dict[Position, int]:
    """Each partition's first offset among ``messages`` (where to read them again from)."""
    starts: dict[Position, int] = {}
    for message in messages:
        topic, partition, offset = coordinates(message)
        starts[(topic, partition)] = min(offset, starts.get((topic, partition), offset))
    return starts


@dataclass
class BatchResult:
    """What one committed batch did."""

    next_offsets: dict[Position, int] = field(default_factory=dict)
    processed: int = 0
    restored: int = 0
    outputs: int = 0
    dead_letters: int = 0
    #: records taken per partition (processed, skipped or restored; counted for metrics only)
    taken: dict[Position, int] = field(default_factory=dict)
    #: when its processing began, on the run's clock
    started: float = 0.0
    #: the ticks it writes (``framework.runtime.ticking``), and how many it read
    ticks: list[Tick] = field(default_factory=list)
    ticks_read: int = 0
    #: the forced ticks it writes (``framework.runtime.ordering``)
    forced: list[Tick] = field(default_factory=list)


class BatchRunner:
    """Runs polled batches for one processor run.

    ``reading`` says which partitions the processor reads (and rebuilds without output);
    ``owned_now`` what the control log says it owns now (see ``HandoffCoordinator.owned``);
    ``clock`` is the run's. With ``transactions`` (the same producer, transactional) each
    batch is one transaction that also commits ``consumer``'s group offsets; ``limits``: the
    output topics' record limits, measured before producing; ``fault`` is called with
    ``batch:transaction-committed`` between its commit and the state's (crash tests kill the
    process there), then ``tick:written`` when the transaction holds a tick (``ticks``, for
    an app with time) and ``tick:read`` when its batch read one. ``count_taken``: count each
    batch's records per partition (``BatchResult.taken``, for metrics). ``learn`` is told
    of registry entries read before a batch (``RecordProcessor.confirm_markers``).
    ``bases``: where growth children's bases are recorded (``InputOrder``; the control log).
    """

    def __init__(
        self,
        config: AppConfig,
        processor: int,
        *,
        reading: Assignment,
        owned_now: Callable[[], set[Position]],
        database: ProcessorDatabase,
        records: RecordProcessor,
        producer: KafkaProducer,
        outputs: RegistryLease,
        stopping: Callable[[], bool],
        clock: Clock,
        transactions: TransactionalProducer | None = None,
        consumer: KafkaConsumer | None = None,
        limits: RecordLimits | None = None,
        fault: Callable[[str], None] = lambda _point: None,
        count_taken: bool = False,
        learn: Callable[[Mapping[str, TopicEntry]], None] = lambda _entries: None,
        bases: GrowthBases | None = None,
    ) -> None:
        self.processor = processor
        self.app_id = config.app_id
        self._config = config
        self._clock = clock
        self._count_taken = count_taken
        self.reading = reading
        self._owned_now = owned_now
        self.database = database
        self.records: RecordProcessor = records
        self.guard = CrashGuard(database, config.crash_limit, processor, clock=clock)
        self.writer = BatchWriter(
            producer,
            outputs,
            config.dead_letters,
            stopping,
            clock,
            # under exactly-once always measured (Kafka's default limit when not read)
            limits=(limits or RecordLimits({})) if transactions is not None else limits,
            transactional=transactions is not None,
            tombstones=CompactionTombstones(config.compaction_tombstones_cached),
        )
        if transactions is not None and consumer is None:
            raise ValueError("a transactional batch runner needs the group's consumer")
        self.transactions = transactions
        self.consumer = consumer
        self.fault = fault
        self._learn = learn
        self.ticks = TickWriter.of(config.time, records, reading, database, clock)
        #: the canonical order of several inputs (``None``: records are applied as read)
        self.ordering = input_order_of(records, database, clock, reading, bases)
        rederive_due(database, records.app)  # (before anything is applied: time.rederive)

    def max_records(self) -> int:
        """How many records to poll: one at a time while crash suspects remain."""
        if self.guard.careful(self.reading.owned):
            return 1
        return self._config.batch.max_records

    def run(self, messages: list[Message]) -> BatchResult:
        """Process ``messages`` (those of owned partitions), write their outputs and dead
        letters, and commit."""
        batch, result, outputs, dead = self.prepare(messages)
        if self.transactions is None:
            producer = self.writer.producer
            if self.ticks is not None:
                self.ticks.write(producer, result.ticks, transactional=False)
            write_forced_ticks(self.ordering, producer, result.forced, transactional=False)
            replaced = self._produce(outputs, dead, messages)
        else:
            replaced = self._transact(self.transactions, outputs, dead, messages, result)
        self.commit(batch, result)
        result.outputs = len(outputs) - replaced
        result.dead_letters = len(dead) + replaced
        return result

    def prepare(
        self, messages: list[Message]
    ) -> tuple[StateBatch, BatchResult, list[EncodedOutput], list[DeadLetter]]:
        """Run the function on ``messages`` (those of owned partitions) in a new state batch;
        returns it (holding the next offsets' writes not yet), what it did, its outputs and
        its dead letters."""
        started = self._clock.monotonic()
        ordering = self.ordering
        # (in order: released by the merge, admitted before it)
        records = self.admit(messages) if ordering is None else self._take(messages)
        ranges = self._ranges(records)
        guard = self.guard
        if ranges:  # a crash from here on counts against these records
            guard.attempt(ranges, () if self.ticks is None else lone_ticks(records, ranges))
        batch = self.database.begin()
        result = BatchResult(started=started)
        if self._count_taken:  # for metrics
            result.taken = Counter(map(_POSITION, records))
        outputs: list[EncodedOutput] = []
        dead: list[DeadLetter] = []
        try:
            self._apply(batch, records, result, outputs, dead)
        except ProcessorStoppedError:
            guard.survived()  # a stop by policy is no crash: a restart tries the record again
            raise
        if ranges:
            guard.survived()
        if ordering is not None:  # what the merge released so far, nothing it holds
            result.next_offsets = ordering.applied(batch)
            result.forced = ordering.forced_ticks(self.reading.flowing)
        if self.ticks is not None:
            result.ticks = self.ticks.decide(batch, result.next_offsets)
        for (topic, partition), next_offset in result.next_offsets.items():
            batch.set_offset(topic, partition, next_offset)
        return batch, result, outputs, dead

    def admit(self, messages: list[Message]) -> list[tuple[Message, str, int, int]]:
        """``messages``' records that may be applied now: of owned partitions, markers
        confirmed, none a gate holds (a record a gate holds stops its partition there)."""
        records = self._take(messages)
        # before the crash guard's attempt: a registry that cannot be read is no record's crash
        confirmed = self.records.confirm_markers(message for message, *_ in records)
        if confirmed:
            self.reading.adopt(confirmed)  # the gates judge by the view the placement check does
            self._learn(confirmed)
        return self.reading.cut(records)

    def commit(self, batch: StateBatch, result: BatchResult) -> None:
        """Commit ``batch`` (open or sealed), which ``prepare`` made with ``result``."""
        batch.commit()
        self.guard.committed(result.next_offsets)

    def _transact(
        self,
        transactions: TransactionalProducer,
        outputs: list[EncodedOutput],
        dead: list[DeadLetter],
        messages: list[Message],
        result: BatchResult,
    ) -> int:
        """Write the batch's outputs, dead letters and group offsets in one transaction and
        commit it (aborted on any failure, which is raised); returns the outputs replaced by
        dead letters for size."""
        assert self.consumer is not None
        offsets = committable(self.reading.restore_below, result.next_offsets)
        if not outputs and not dead and not offsets and not result.ticks and not result.forced:
            return 0  # a batch rebuilt below the group's offsets: nothing to write
        try:
            transactions.begin()
            try:
                if self.ticks is not None:
                    self.ticks.write(transactions, result.ticks, transactional=True)
                write_forced_ticks(self.ordering, transactions, result.forced, transactional=True)
                replaced = self._produce(outputs, dead, messages)
                if offsets:
                    transactions.send_offsets(offsets, self.consumer)
                transactions.commit(TRANSACTION_SECONDS)
            except ProducerFencedError:
                raise
            except BaseException:
                abort_quietly(transactions, self.processor)
                if self.ticks is not None:
                    self.ticks.dropped()  # (never to be read)
                if self.ordering is not None:
                    self.ordering.dropped()
                raise
        except ProducerFencedError as error:
            raise fenced(self.processor, error) from None
        self.fault("batch:transaction-committed")
        if result.ticks:
            self.fault("tick:written")
        if result.ticks_read:
            self.fault("tick:read")
        return replaced

    def _take(self, messages: list[Message]) -> list[tuple[Message, str, int, int]]:
        """The records of owned partitions (one fetched before its partition was released
        is not)."""
        owned = self.reading.owned
        records: list[tuple[Message, str, int, int]] = []
        for message in messages:
            topic, partition, offset = coordinates(message)
            if (topic, partition) in owned:
                records.append((message, topic, partition, offset))
        return records

    def _ranges(self, records: list[tuple[Message, str, int, int]]) -> dict[Position, list[int]]:
        """The ranges (position -> [first, last]) the function will run on (not records
        skipped after crashes)."""
        guard = self.guard
        careful = bool(guard.suspects)
        ranges: dict[Position, list[int]] = {}
        for _message, topic, partition, offset in records:
            if careful and guard.crashes(topic, partition, offset) >= guard.limit:
                continue
            span = ranges.get((topic, partition))
            if span is None:
                ranges[(topic, partition)] = [offset, offset]
            else:
                span[1] = offset
        return ranges

    def _apply(
        self,
        batch: StateBatch,
        records: list[tuple[Message, str, int, int]],
        result: BatchResult,
        outputs: list[EncodedOutput],
        dead: list[DeadLetter],
    ) -> None:
        """Run the function on ``records`` (or skip those that crashed it too often)."""
        guard, process = self.guard, self.records.process
        careful = bool(guard.suspects)
        restore_below, next_offsets = self.reading.restore_below, result.next_offsets
        mine = keys_of_mine(self.reading, self._owned_now()) if restore_below else None
        timing = self.records.timing
        letters = None if timing is None else self.records.take_letters
        ticks_before = 0 if timing is None else timing.ticks
        for message, topic, partition, offset in records:
            bound = restore_below.get((topic, partition))
            restore = bound is not None and offset < bound
            tick = restore and mine is not None and letters is not None
            tick = tick and is_tick_message(topic, message)  # (rebuilt: for keys of mine)
            if restore and not tick and mine and not mine(topic, partition, message.key()):
                dead_letter = None  # from before a growth: a key another processor owns now
            elif careful and guard.crashes(topic, partition, offset) >= guard.limit:
                dead_letter = self._skip(batch, message, restore)
            else:
                where = (topic, partition, offset)
                keys = partial(mine, topic, partition) if tick and mine else None  # (its keys)
                apply = process
                if careful and letters is not None and is_tick_message(topic, message):
                    apply = partial(guarded_tick, guard, self.records)  # (an item may kill it)
                produced, dead_letter = apply(
                    batch, message, restore=restore, where=where, keys=keys
                )
                outputs.extend(produced)
                if letters is not None:
                    dead.extend(letters())  # (timers that failed)
            if dead_letter is not None:
                dead.append(dead_letter)
            next_offsets[(topic, partition)] = offset + 1
            if restore:
                result.restored += 1
            else:
                result.processed += 1
        if timing is not None:
            result.ticks_read = timing.ticks - ticks_before

    def _skip(self, batch: StateBatch, message: Message, restore: bool) -> DeadLetter | None:
        """Skip a record that crashed the processor ``crash_limit`` times (or stop, with
        ``on_error: stop``)."""
        where = coordinates(message)
        if self.records.stop_on_error:
            self.guard.survived()  # so that a restart (after a fix) runs the record again
            raise ProcessorStoppedError(
                f"{where[0]}[{where[1]}]@{where[2]} (key {message.key()!r}) killed the "
                f"processor {self.guard.crashes(*where)} times (it exited, crashed, ran out "
                "of memory or was killed while the function ran on it). Fix the function or "
                "the record, then restart; or set on_error: dead-letter to skip such records.",
                at=where,
            )
        return self.guard.skip(batch, message, where, self._config.dead_letters, restore)

    def _produce(
        self, outputs: list[EncodedOutput], dead: list[DeadLetter], messages: list[Message]
    ) -> int:
        """Produce outputs and dead letters and wait for all of them (or raise); returns how
        many outputs Kafka refused as too large (each became a dead letter instead)."""

        def source(where: Where | None) -> Message | None:
            for message in messages:
                if where == (message.topic(), message.partition(), message.offset()):
                    return message
            return None

        return len(self.writer.write(outputs, dead, source))
