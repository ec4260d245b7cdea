"""One run of a processor: open its parts, run its loop, close them.

``ProcessorRuntime.run`` checks and reads the app's layout and control log, opens the
processor's state and its Kafka clients (``RunClients``), builds the parts the loop owns --
which partitions it reads (``Assignment``) and its parts in a scale (``HandoffCoordinator``)
-- and runs the loop over batches (``BatchLoop``, where the per-batch steps are described)
until it is stopped, told to stop, or has no work left; then it closes everything.
"""

from __future__ import annotations

import logging
import signal
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from types import FrameType

from framework.app import App
from framework.clock import Clock
from framework.coordination.control_log import ControlLog, ControlWatcher
from framework.coordination.layout import AppLayout, prepare_app
from framework.coordination.registry import TopicRegistry
from framework.coordination.topic_watch import TopicWatcher
from framework.errors import SplitstateError
from framework.growth.lease import RegistryLease
from framework.growth.marker_log import find_marker
from framework.growth.placement import UNFENCED_SCOPE, UNPLACED_SCOPE
from framework.kafka import Clients, Kafka, KafkaConsumer, KafkaIOError, KafkaProducer
from framework.metrics import MetricsServer, ProcessorMetrics
from framework.processing import ProcessorFencedError, ProcessorStoppedError, RecordProcessor
from framework.runtime.assignment import Assignment
from framework.runtime.batch_loop import BatchLoop
from framework.runtime.clients import RunClients, transactional_id
from framework.runtime.completions import Completions
from framework.runtime.faults import maybe_crash
from framework.runtime.handoffs import HandoffCoordinator
from framework.runtime.log_context import note_generation
from framework.runtime.observe import RunObserver, RunParts, after_each_step
from framework.runtime.record_limits import RecordLimits
from framework.runtime.reporting import ProgressReporter
from framework.runtime.run_voice import record_run
from framework.runtime.state_dir import DatabaseOpener, StateDirectory, move_aside
from framework.runtime.stats import RuntimeStats
from framework.runtime.unplaced_log import UnplacedWarnings
from framework.snapshots.taker import SnapshotTaker
from rebalance.control import ControlState
from statestore import DatabaseIdentity, ProcessorDatabase, processor_path
from statestore.owner_only import private_directory
from statestore.snapshot_store import SnapshotStore

__all__ = ["DatabaseOpener", "ProcessorRuntime", "RuntimeStats"]

log = logging.getLogger(__name__)


class ProcessorRuntime:
    """Runs processor ``processor_id`` of ``app`` until stopped (or it has no work left).

    ``kafka``: the port every Kafka client of the run comes from (default: confluent-kafka
    clients of the app's config, closed when ``run`` returns); its clock is the run's.
    ``open_database``: how the processor's state is opened (default:
    ``ProcessorDatabase.open``; the simulation keeps its own disks). ``snapshots``: whether
    the run takes snapshots and restores a lost directory from them (default: with the
    default opener, as ``snapshots.enabled`` says); ``holds_state``: whether a state
    directory holds anything (default: it is a directory that is not empty); ``discard``:
    how a stale state directory is put away (default: renamed, ``state_dir.move_aside``).

    With ``metrics.port`` set, ``metrics`` holds the processor's Prometheus registry and
    health, served on that port while ``run`` runs (``/metrics``, ``/healthz``, ``/readyz``).
    """

    def __init__(
        self,
        app: App,
        processor_id: int,
        kafka: Kafka | None = None,
        *,
        open_database: DatabaseOpener = ProcessorDatabase.open,
        snapshots: bool | None = None,
        holds_state: Callable[[Path], bool] | None = None,
        discard: Callable[[Path], None] | None = None,
    ) -> None:
        self.app = app
        self._discard = discard
        self._kafka = kafka
        self._open_database = open_database
        self._snapshots = snapshots
        self._holds_state = holds_state
        self.processor_id = processor_id
        self.config = app.config
        self.stats = RuntimeStats()
        self._stopping = False
        settings = self.config.metrics
        self.metrics = (
            None
            if settings.port is None
            else ProcessorMetrics(self.config.app_id, processor_id, settings.stall_seconds)
        )
        #: the endpoint while ``run`` runs (its ``port`` is the one picked for port 0)
        self.server: MetricsServer | None = None

    def request_stop(self, *_args: object) -> None:
        """Finish the current batch, commit, and return from ``run`` (signal-safe)."""
        self._stopping = True

    def install_signal_handlers(self) -> None:
        """Stop gracefully on SIGTERM and SIGINT."""

        def handler(_signum: int, _frame: FrameType | None) -> None:
            self.request_stop()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    def _stopped(self) -> bool:
        return self._stopping

    def run(self, until: Callable[[RuntimeStats], bool] | None = None) -> RuntimeStats:
        """Process until a stop is requested, ``until(stats)`` holds, or no work is left."""
        if self.metrics is not None:  # first: health answers while the run starts
            settings = self.config.metrics
            self.server = MetricsServer(self.metrics, settings.host, settings.port or 0).start()
        try:
            kafka = Clients.of(self.config) if self._kafka is None else self._kafka
            try:
                return self._run(kafka, until)
            finally:
                if self._kafka is None:
                    kafka.close()
        finally:
            self._stop_serving()

    def _stop_serving(self) -> None:
        """Stop the endpoint (before the run's Kafka clients close; again: nothing)."""
        if self.server is not None:
            self.server.stop()
        if self.metrics is not None:
            self.metrics.heartbeat.beat("stopped")

    def _beat(self) -> None:
        """A sign of life during long start-up work (a snapshot restore, slice by slice)."""
        if self.metrics is not None:
            self.metrics.heartbeat.beat()

    def _record_limits(self, kafka: Kafka, exactly_once: bool) -> RecordLimits | None:
        """The output topics' record limits, to measure outputs against before producing
        them; under at-least-once ``None`` (nothing measured, a refusal is handled after it)
        when they cannot be read (e.g. no ``DescribeConfigs`` right)."""
        written = [*(t.topic for t in self.config.outputs), self.config.dead_letters]
        try:
            return RecordLimits.read(kafka, written)
        except KafkaIOError as error:
            if exactly_once:
                raise
            log.warning(
                "processor %d: cannot read the output topics' max.message.bytes (%s); outputs "
                "are not measured before they are produced (one Kafka refuses is sent again "
                "alone, then becomes a dead letter)",
                self.processor_id,
                error,
            )
            return None

    def _open_state(
        self,
        layout: AppLayout,
        state: ControlState,
        opened: ExitStack,
        clock: Clock,
        instance: str,
    ) -> tuple[ProcessorDatabase, Completions, SnapshotTaker | None]:
        """Open the processor's database (restored from its newest snapshot when the
        directory was lost, replaced when stale: ``StateDirectory``), what it completed,
        and, on disk with snapshots on, its snapshot taker (its manifests name this run,
        ``instance``)."""
        identity = DatabaseIdentity(
            self.config.app_id, self.processor_id, layout.fixed_parameters()
        )
        state_dir = self.config.app_state_dir
        path = processor_path(state_dir, self.processor_id)
        on_disk = self._open_database == ProcessorDatabase.open
        if on_disk:  # everything of the app's state below it: owner-only (statestore.owner_only)
            private_directory(state_dir)
        use = (on_disk if self._snapshots is None else self._snapshots) and (
            self.config.snapshots.enabled
        )
        counts = {name: entry.history.created for name, entry in layout.inputs.items()}
        directory = StateDirectory(
            self.config,
            identity,
            path,
            open_database=self._open_database,
            stores=self.app.store_specs(),
            discard=self._discard or move_aside(clock),
            restore=use,
            holds_state=self._holds_state,
            progress=self._beat,
        )
        database, completions = directory.open(state, state.owned(self.processor_id, counts))
        opened.callback(database.close)
        if not use:
            return database, completions, None
        store = SnapshotStore(self.config.snapshot_url, self.config.app_id)
        snapshots = SnapshotTaker(
            self.config,
            self.processor_id,
            database,
            store,
            clock,
            instance=instance,
            fault=lambda point: maybe_crash(point, self.processor_id, state_dir),
        )
        opened.callback(snapshots.close)
        return database, completions, snapshots

    def _between_steps(
        self,
        kafka: Kafka,
        database: ProcessorDatabase,
        watcher: ControlWatcher,
        records: RecordProcessor,
        opened: ExitStack,
    ) -> list[Callable[[], None]]:
        """What the loop does after each step, when due: the run's progress report (its last,
        stopped, is written as the run closes, before the state and the clients close) and
        the warning of unplaced input records (also as the run ends)."""
        reporter = ProgressReporter(
            self.app, self.processor_id, kafka=kafka, database=database, watcher=watcher
        )
        opened.callback(reporter.close)
        warnings = UnplacedWarnings(
            self.processor_id, records, kafka.clock, self.config.dead_letters
        )
        opened.callback(warnings.check)
        return [reporter.tick, warnings.tick]

    def _observer(
        self, parts: RunParts, consumer: KafkaConsumer, opened: ExitStack, clock: Clock
    ) -> RunObserver | None:
        """With metrics on, the run's observer; the endpoint stops as the run closes, after
        a last observation and before the clients close."""
        if self.metrics is None:
            return None
        observer = RunObserver(
            self.metrics,
            self.processor_id,
            parts=parts,
            consumer=consumer,
            stats=self.stats,
            stopping=self._stopped,
            clock=clock,
        )
        opened.callback(self._stop_serving)
        opened.callback(observer.last)
        return observer

    def _run(self, kafka: Kafka, until: Callable[[RuntimeStats], bool] | None) -> RuntimeStats:
        clock = kafka.clock
        self.stats.started = clock.monotonic()
        registry_read = clock.monotonic()  # the outputs' lease runs from the registry read
        layout = prepare_app(self.app, kafka, self.processor_id)
        instance = uuid.uuid4().hex  # this run's id in the control log
        # whatever was opened is closed however the run ends (last opened, first closed)
        with ExitStack() as opened:
            control = ControlLog(kafka, self.config.control_topic)
            watcher = control.watch()
            opened.callback(watcher.close)
            watcher.on_change(note_generation)  # log lines name the generation in force
            watcher.catch_up(watcher.end_offset())
            if not watcher.state.has_work(self.processor_id):
                raise SplitstateError(
                    f"processor {self.processor_id} has no work: app {self.config.app_id!r} "
                    f"runs processors 0..{(watcher.state.processors or 1) - 1} and no scale "
                    "adds it. Fix: use an id in that range, or scale first (`splitstate scale`)."
                )
            database, completions, snapshots = self._open_state(
                layout, watcher.state, opened, clock, instance
            )
            watcher.record_in(database)  # notes the generation seen (control_guard)
            outputs = RegistryLease(  # outputs may be other apps' inputs: placed under a lease
                TopicRegistry(kafka), layout.outputs, clock, read_at=registry_read
            )
            exactly_once = self.config.processing_guarantee == "exactly-once"
            limits = self._record_limits(kafka, exactly_once)
            clients = RunClients.open(
                kafka,
                self.config.app_id,
                outputs.delivery_timeout_ms,
                transactional_id(self.config.app_id, self.processor_id) if exactly_once else None,
                batch_bytes=None if limits is None else limits.batch_bytes(),
            )
            opened.callback(clients.consumer.close)
            opened.callback(clients.producer.close)
            opened.callback(outputs.close)  # (first: its renewer reads the producer's metadata)
            record_run(control, watcher, self.processor_id, instance)
            records = RecordProcessor(
                self.app,
                {name: entry.initial_partitions for name, entry in layout.inputs.items()},
                database.progress(UNFENCED_SCOPE),
                {name: entry.history for name, entry in layout.inputs.items()},
                unplaced=database.progress(UNPLACED_SCOPE),
                growths={n: e.growth for n, e in layout.inputs.items() if e.growth is not None},
                registry=TopicRegistry(kafka).read,
                find_marker=lambda *at: find_marker(kafka, *at),
            )
            topics = TopicWatcher(kafka, list(layout.inputs), layout.inputs)
            handoffs = HandoffCoordinator(
                self.app,
                self.processor_id,
                watcher=watcher,
                control=control,
                database=database,
                records=records,
                kafka=kafka,
                consumer=clients.consumer,
                instance=instance,
                completions=completions,
                transactions=clients.transactions,
            )
            opened.callback(handoffs.close)
            opened.callback(_flush_quietly, clients.producer)
            reading = Assignment(self.processor_id, clients.consumer, database, layout, clock)
            observer = self._observer(
                RunParts(reading, handoffs, watcher, outputs, database, snapshots),
                clients.consumer,
                opened,
                clock,
            )
            loop = BatchLoop(
                self.config,
                self.processor_id,
                self.stats,
                clients=clients,
                database=database,
                watcher=watcher,
                control=control,
                topics=topics,
                records=records,
                outputs=outputs,
                reading=reading,
                handoffs=handoffs,
                snapshots=snapshots,
                limits=limits,
                every_step=after_each_step(
                    self._between_steps(kafka, database, watcher, records, opened), observer
                ),
                stopping=self._stopped,
                clock=clock,
                observer=observer,
            )
            outputs.start(clients.producer)
            topics.poll(force=True)
            topics.record_hash(control, watcher.state.metadata_hash, starting=True)
            loop.adopt_topics()
            loop.read_owned()
            log.info(
                "processor %d of %s: partitions %s, state in %s",
                self.processor_id,
                self.config.app_id,
                sorted(f"{t}[{p}]" for t, p in reading.owned),
                database.path,
            )
            try:
                loop.coordinate()
                loop.run(until)
            except ProcessorFencedError as error:
                if not _replaced(control, self.processor_id, instance, clock):
                    raise KafkaIOError(
                        f"processor {self.processor_id}'s transactions were fenced, but no "
                        "newer run of it started: the broker aborted a transaction that ran "
                        "over transaction.timeout.ms (Kafka cannot say which). It exits, to be "
                        f"restarted. ({error})"
                    ) from None
                raise
            except ProcessorStoppedError as error:
                handoffs.report_stop(error)
                raise
        return self.stats


def _replaced(control: ControlLog, processor: int, instance: str, clock: Clock) -> bool:
    """Whether a newer run of ``processor`` than ``instance`` recorded itself in the control
    log (it may record itself a moment after it fenced this one: looked for a few times)."""
    for _attempt in range(5):
        newest = control.read().instances.get(processor)
        if newest is not None and newest != instance:
            return True
        clock.sleep(1.0)
    return False


def _flush_quietly(producer: KafkaProducer) -> None:
    """Flush what is queued as the run ends; a failure is logged, so that the error that ended
    the run (e.g. a fenced producer's) is the one raised."""
    try:
        producer.flush(30)
    except KafkaIOError as error:
        log.warning("flushing the producer as the run ends: %s", error)
