"""One processor's single-threaded loop (seed 004): poll, process, produce, commit, coordinate.

Per batch, in this order:

1. poll up to ``batch.max_records`` records from the partitions this processor owns;
2. run the processor function on each, collecting outputs and dead letters;
3. produce them;
4. once Kafka acknowledged them, commit the state changes and the next input offsets as one
   RocksDB WriteBatch;
5. commit those offsets to the app's consumer group (T1).

Up to ``batch.in_flight`` batches are between 3 and 4 at a time (``Pipeline``): the next
batches are polled and processed, reading the state of the ones before them, while Kafka
acknowledges. A crash before 4 processes the batch again from the old offsets (state
untouched, outputs repeated: at-least-once output); after 4 the batch is never applied again:
exactly-once state. Under ``processing_guarantee: exactly-once`` the batches in flight share
one Kafka transaction, holding their outputs and the group's offsets (3 and 5), committed
before 4: a transaction that cannot commit is aborted and its batches read again. A batch that
must wait (crash suspects, ``in_flight: 1``) goes through ``BatchRunner.run``, which waits.

Between batches the processor follows the control log (``ControlWatcher``) and asks its
``HandoffCoordinator`` what to do in a scale (the catch-up protocol, KIP-287): which partitions to
read (``Assignment`` makes the consumer read exactly those), which READY handoffs to release at this
batch boundary (it stops reading them, the coordinator commits F and writes RELEASE), and it lets
the coordinator step a receiver's catch-up and forget keys given away. Before any of that, the
batches in flight are committed (``drain``). Exactly one processor emits output for each record.

An input written by a transactional producer holds offsets without a record (markers, aborted
records). When the input is idle (once a second at most), before a release and while a rebuild runs,
the state's and the group's offsets move to where the consumer got past them (``passed_over``), so
that F, T1 and the lag do not count them as records not read yet."""

from __future__ import annotations

import logging
from collections.abc import Callable

from framework.clock import Clock
from framework.config import AppConfig
from framework.coordination.control_log import ControlLog, ControlWatcher
from framework.coordination.topic_watch import TopicWatcher
from framework.gc_tuning import fewer_collections
from framework.growth.lease import RegistryLease
from framework.kafka import KafkaIOError, Message, OffsetResetError, TransactionAbortableError
from framework.processing import ProcessorFencedError, ProcessorStoppedError, RecordProcessor
from framework.runtime.assignment import Assignment
from framework.runtime.batches import BatchResult, BatchRunner, first_offsets
from framework.runtime.clients import RunClients
from framework.runtime.faults import maybe_crash
from framework.runtime.first_reads import FirstReads
from framework.runtime.growth_bases import ControlBases
from framework.runtime.handoffs import HandoffCoordinator
from framework.runtime.observe import RunObserver, progress_line
from framework.runtime.passed_over import PassOver
from framework.runtime.pipeline import Pipeline
from framework.runtime.record_limits import RecordLimits
from framework.runtime.recovery import committable
from framework.runtime.stats import RuntimeStats
from framework.snapshots.taker import SnapshotTaker
from statestore import ProcessorDatabase

__all__ = ["BatchLoop", "RuntimeStats"]

# the processor's lines keep the loop's logger name
log = logging.getLogger("framework.runtime.loop")
_LOG_EVERY_SECONDS = 10.0
#: aborted transactions in a row after which the processor exits (the supervisor restarts it
#: with backoff): a write that keeps failing is not retried at once for ever
_ABORTS_IN_A_ROW = 5


def _nothing(*_args: object) -> None:
    """What the loop tells when metrics are off."""


class BatchLoop:
    """The loop of one run of processor ``processor`` over the parts the run opened."""

    def __init__(
        self,
        config: AppConfig,
        processor: int,
        stats: RuntimeStats,
        *,
        clients: RunClients,
        database: ProcessorDatabase,
        watcher: ControlWatcher,
        control: ControlLog,
        topics: TopicWatcher,
        records: RecordProcessor,
        outputs: RegistryLease,
        reading: Assignment,
        handoffs: HandoffCoordinator,
        snapshots: SnapshotTaker | None = None,
        limits: RecordLimits | None = None,
        every_step: Callable[[], None] | None = None,
        stopping: Callable[[], bool],
        clock: Clock,
        observer: RunObserver | None = None,
    ) -> None:
        self.config = config
        self._clock = clock
        self.processor = processor
        self.stats = stats
        self._clients = clients
        self._database = database
        self._watcher = watcher
        self._control = control
        self._topics = topics
        self._records = records
        self._outputs = outputs
        self._reading = reading
        self._handoffs = handoffs
        self._snapshots = snapshots
        self._limits = limits
        self._every_step = every_step  # e.g. the progress report, when due
        self._stopping = stopping
        # metrics, when on: told of each committed batch (of each step through every_step)
        self._observe = _nothing if observer is None else observer.settled
        self._runner: BatchRunner | None = None
        self._pipeline: Pipeline | None = None
        self._lease_warned = 0.0
        self._aborted = 0
        #: handoffs completed (``HandoffCoordinator.takeovers``) when last read
        self._takeovers = 0
        #: the state's and the group's offsets over what the consumer passed without a record
        fault = lambda point: maybe_crash(point, processor, config.app_state_dir)  # noqa: E731
        self._passing = PassOver(processor, database, clients, clock, fault=fault)
        #: partitions taken over, first records not read yet (batches wait briefly meanwhile)
        self._first_reads = FirstReads(processor, clock)

    def adopt_topics(self) -> None:
        """Take the registry's current view of the input topics (a growth, its thresholds)."""
        self._reading.adopt(self._topics.entries)
        entries = self._topics.entries
        self._records.adopt(
            {name: entry.history for name, entry in entries.items()},
            {name: entry.growth for name, entry in entries.items() if entry.growth is not None},
        )

    def read_owned(self) -> None:
        """Read what the coordinator says this processor owns (held records checked again)."""
        layout = self._reading.layout
        self._reading.assign(self._reading.checked(self._handoffs.owned(layout)))

    def coordinate(self) -> None:
        """Act on the control state: ownership, then joining a scale or completing."""
        self.read_owned()
        self._handoffs.follow(self._reading.layout)

    def run(self, until: Callable[[RuntimeStats], bool] | None) -> None:
        """Loop until stopped, ``until(stats)`` holds, or no work is left; then commit.

        Python's cycle collector runs less often meanwhile (``fewer_collections``): records
        make many short-lived objects that reference counting frees, and frequent collections
        of the young ones took about a tenth of the loop's time."""
        last_log = self._clock.monotonic()
        with fewer_collections():
            while not self._stopping() and (until is None or not until(self.stats)):
                if not self.step():
                    break
                if self._every_step is not None:
                    self._every_step()
                now = self._clock.monotonic()
                if now - last_log >= _LOG_EVERY_SECONDS:
                    catchup = self._handoffs.catchup
                    log.info("%s", progress_line(self.processor, self.stats, now, catchup))
                    last_log = now
            self.drain()
        self._commit_state("final consumer group commit")

    def step(self) -> bool:
        """Follow the logs, process one batch, play the scale parts; ``False`` once this
        processor has no work left (it stops). Batches in flight are committed first
        whenever anything but processing is to be done."""
        handoffs = self._handoffs
        if self._watcher.poll():
            self.drain()
            self.coordinate()
        if self._topics.poll():
            self.drain()
            self.adopt_topics()
            self.coordinate()
        self._topics.record_hash(self._control, self._watcher.state.metadata_hash)
        if self._reading.gates_due():
            self.drain()
            self.read_owned()
        if not self._watcher.state.has_work(self.processor):
            self.drain()
            handoffs.forget_all()
            log.info(
                "processor %d has no partitions left; it stops. Its state stays in %s "
                "until you remove it.",
                self.processor,
                self._database.path,
            )
            return False
        if self._reading.owned and handoffs.release_due:
            self.drain()  # released at this boundary, before another batch is read
            self._pass_over(now=True)  # F is where the consumer got to
            self._release_ready()
        if self._reading.rebuilding():  # a rebuild ends where the consumer passed its bound
            self._pass_over()
        if handoffs.catching_up and not self._reading.rebuilding():
            self.drain()  # (a RELEASE just read is taken over before another batch)
            self.stats.replayed += handoffs.catch_up()
            if handoffs.takeovers != self._takeovers:
                self._takeovers = handoffs.takeovers
                before = set(self._reading.owned)
                self.read_owned()
                self._first_reads.began(self._reading.owned - before)
        wait = 0.0 if handoffs.catching_up else self.config.batch.max_wait_ms / 1000
        wait = self._first_reads.wait(wait)
        if self._reading.owned:
            self._process_batch(wait)
        elif not handoffs.catching_up or handoffs.bootstrapping:
            self._clock.sleep(self.config.batch.max_wait_ms / 1000)
        if handoffs.forgetting:
            self.drain()
            handoffs.forget_step()
        if self._snapshots is not None:
            owned = handoffs.owned(self._reading.layout)
            # (first the state's offsets to the group: a snapshot then covers nothing past T1)
            commit = lambda: self._commit_state("snapshot put off")  # noqa: E731
            self._snapshots.step(owned, self._watcher.state, commit)
        return True

    def drain(self) -> None:
        """Commit every batch in flight (a transaction that cannot commit drops them: they
        are read again)."""
        pipeline = self._pipeline
        if pipeline is None or not pipeline.in_flight:
            return
        try:
            self._settled(pipeline.drain())
        except TransactionAbortableError as error:
            self._aborted_batch(error)

    def _commit_state(self, what: str) -> bool:
        """Under at-least-once, commit the state's offsets of what it reads to the group
        (under exactly-once each batch's transaction did, before the state); ``False`` when
        Kafka refused (logged with ``what``)."""
        if self._clients.transactions is not None:
            return True
        owned, offsets = self._reading.owned, self._database.offsets()
        commits = committable(
            self._reading.restore_below, {p: offsets[p] for p in owned & set(offsets)}
        )
        try:
            if commits:
                self._clients.consumer.commit(commits)
        except KafkaIOError as error:
            log.warning("processor %d: %s: commit failed: %s", self.processor, what, error)
            return False
        return True

    def _process_batch(self, wait: float) -> None:
        if not self._outputs.fresh():
            # the output counts may be stale: process nothing until the registry is readable
            now = self._clock.monotonic()
            if now - self._lease_warned > _LOG_EVERY_SECONDS:
                self._lease_warned = now
                log.warning(
                    "processor %d: cannot re-read the topic registry within the output "
                    "topics' lease; processing waits (outputs could land on the wrong "
                    "partition). Fix: make Kafka reachable.",
                    self.processor,
                )
            self._clock.sleep(0.5)
            return
        runner, pipeline = self._runner_and_pipeline()
        consumer = self._clients.consumer
        try:
            messages = consumer.consume(most := runner.max_records(), max(wait, 0.01))
        except OffsetResetError as error:
            raise ProcessorStoppedError(
                f"processor {self.processor} cannot read on: retention deleted records it had "
                f"not read yet ({error.reason}). Reading on would leave them out of the state "
                "for good, so it stops. Fix: rebuild the state from an archive that holds them "
                "(`splitstate backfill MODULE:APP --source parquet PATH --replace`), or accept "
                "the loss by starting the app over; and keep the whole input history "
                "(retention.ms=-1 on input topics, what `splitstate topics create` sets)."
            ) from None
        self._first_reads.read(messages)
        if runner.ordering is not None:  # several inputs: what the merge releases, in order
            messages = runner.ordering.take(runner.admit(messages), self._reading.owned, most)
        if not messages:
            self.drain()  # the input is idle: nothing waits behind the batches in flight
            self._pass_over()
            self._settled(pipeline.idle())  # (ticks: time passes for keys without records)
            return
        if pipeline.accepts(messages):
            try:
                pipeline.start(messages)
                self._settled(pipeline.settle(wait=pipeline.in_flight >= pipeline.depth))
            except TransactionAbortableError as error:
                self._aborted_batch(error)  # the pipeline dropped its batches and rewound
            except ProcessorFencedError:
                raise
            except ProcessorStoppedError:
                try:
                    self.drain()  # the state is at the batch before the failed record
                except Exception as error:  # the stop is what to report, not this
                    log.warning(
                        "processor %d: the batches before the failed record did not commit "
                        "(they are processed again at the restart): %s",
                        self.processor,
                        error,
                    )
                raise
            return
        self.drain()
        try:
            result = runner.run(messages)
        except TransactionAbortableError as error:
            self._rewind(messages)
            self._aborted_batch(error)
            return
        self._settled([result])

    def _runner_and_pipeline(self) -> tuple[BatchRunner, Pipeline]:
        if self._runner is None or self._pipeline is None:
            self._runner = BatchRunner(
                self.config,
                self.processor,
                reading=self._reading,
                owned_now=lambda: self._handoffs.owned(self._reading.layout),
                database=self._database,
                records=self._records,
                producer=self._clients.producer,
                outputs=self._outputs,
                stopping=self._stopping,
                clock=self._clock,
                transactions=self._clients.transactions,
                consumer=self._clients.consumer,
                limits=self._limits,
                fault=lambda point: maybe_crash(point, self.processor, self.config.app_state_dir),
                count_taken=self._observe is not _nothing,
                learn=self._topics.learn,  # (a step Kafka's metadata does not show)
                bases=ControlBases(lambda: self._watcher.state, self._control.append),
            )
            batch = self.config.batch
            self._pipeline = Pipeline(
                self._runner, batch.in_flight, batch.max_wait_ms / 1000, self._clock
            )
        return self._runner, self._pipeline

    def _aborted_batch(self, error: TransactionAbortableError) -> None:
        """A transaction could not commit (its batches are to be read again): back off, or
        exit after too many in a row."""
        self._aborted += 1
        if self._aborted >= _ABORTS_IN_A_ROW:
            raise KafkaIOError(
                f"processor {self.processor}: {self._aborted} transactions in a row could "
                f"not commit; the last: {error}. It exits (to be restarted)."
            ) from None
        log.warning("processor %d: %s", self.processor, error)
        self._clock.sleep(0.2 * self._aborted)

    def _settled(self, results: list[BatchResult]) -> None:
        """Account for committed batches (and, under at-least-once, commit their offsets to
        the group, asynchronously)."""
        for result in results:
            self._aborted = 0
            commits = committable(self._reading.restore_below, result.next_offsets)
            if commits and self._clients.transactions is None:
                self._clients.consumer.commit(commits, asynchronous=True)
            self.stats.records += result.processed
            if self._snapshots is not None:
                self._snapshots.processed(result.processed + result.restored)
            self.stats.restored += result.restored
            self.stats.outputs += result.outputs
            self.stats.dead_letters += result.dead_letters
            self.stats.batches += 1
            self._observe(result)

    def _rewind(self, messages: list[Message]) -> None:
        """Read an aborted batch's records again (merged inputs: from the state's offsets)."""
        ordering = self._runner.ordering if self._runner else None
        starts = first_offsets(messages) if ordering is None else ordering.rewind()
        for position in starts.keys() & self._reading.owned:
            self._clients.consumer.seek(position, starts[position])
        self._reading.rewound(starts)

    def _pass_over(self, *, now: bool = False) -> None:
        """Follow the offsets passed over without a record (``PassOver``), once a second
        at most unless ``now``, with every batch in flight committed first."""
        if self._passing.due(now):
            self.drain()  # every record delivered is applied: what lies between was passed
            ordering = self._runner.ordering if self._runner else None
            held = set() if ordering is None else ordering.waiting()  # (read, not applied)
            self._passing.follow(self._reading.flowing - held, self._reading.restore_below)

    def _release_ready(self) -> None:
        """At a batch boundary: stop reading the partitions of READY handoffs the coordinator
        gives away, then let it commit their F and write RELEASE, one handoff at a time."""
        for release in self._handoffs.releases(self._reading.layout):
            self._reading.assign(self._reading.owned - release.partitions)
            self._first_reads.forget(release.partitions)
            self._handoffs.release(release)
