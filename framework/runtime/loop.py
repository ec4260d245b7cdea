"""One processor's single-threaded loop (seed 004): poll, process, produce, commit, coordinate.

Per batch, in this order:

1. poll up to ``batch.max_records`` records from the partitions this processor owns;
2. run the processor function on each, collecting outputs and dead letters;
3. produce them and wait until Kafka has them all (``flush``);
4. commit the state changes and the next input offsets as one RocksDB WriteBatch;
5. commit those offsets to the app's consumer group (T1).

A crash before 4 replays the batch from the old offsets (state untouched, outputs repeated:
at-least-once output); after 4 the batch is never applied again: exactly-once state.

Between batches the processor follows the control log (``ControlWatcher``) and plays its
parts in a scale (the catch-up protocol, KIP-287): as an old owner it releases a READY
handoff's partitions at a batch boundary, committing their final offsets F and writing
RELEASE; as a receiver it catches up (``CatchUp``), declares CAUGHT_UP when T1 - T2 is small,
finishes to F after RELEASE, and takes the partitions over from F (COMPLETE). Exactly one
processor emits output for each record.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable
from dataclasses import replace
from types import FrameType

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from framework.app import App
from framework.coordination.control_log import ControlLog
from framework.coordination.control_watch import ControlWatcher
from framework.coordination.layout import prepare_app
from framework.coordination.registry import TopicRegistry
from framework.coordination.topic_watch import TopicWatcher
from framework.errors import SplitstateError
from framework.growth.gates import blocked_partitions
from framework.growth.lease import RegistryLease
from framework.growth.placement import UNFENCED_SCOPE
from framework.processing import (
    ProcessorStoppedError,
    RecordProcessor,
)
from framework.runtime.batches import BatchRunner
from framework.runtime.handoffs import HandoffProtocol
from framework.runtime.moved_keys import MovedKeys
from framework.runtime.recovery import check_rebuildable, committable
from framework.runtime.retention import check_retained
from framework.runtime.session import RuntimeStats, Session
from rebalance.positions import Position
from statestore import DatabaseIdentity, ProcessorDatabase, processor_path

__all__ = ["ProcessorRuntime", "RuntimeStats"]

log = logging.getLogger(__name__)
_LOG_EVERY_SECONDS = 10.0
_GATE_SECONDS = 0.5


class ProcessorRuntime(HandoffProtocol):
    """Runs processor ``processor_id`` of ``app`` until stopped (or it has no work left)."""

    def __init__(self, app: App, processor_id: int) -> None:
        self.app = app
        self.processor_id = processor_id
        self.config = app.config
        self.stats = RuntimeStats()
        self._stopping = False
        self._lease_warned = 0.0
        self._runner: BatchRunner | None = None

    def request_stop(self, *_args: object) -> None:
        """Finish the current batch, commit, and return from ``run`` (signal-safe)."""
        self._stopping = True

    def install_signal_handlers(self) -> None:
        """Stop gracefully on SIGTERM and SIGINT."""

        def handler(_signum: int, _frame: FrameType | None) -> None:
            self.request_stop()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    # -- setup -----------------------------------------------------------------------------

    def run(self, until: Callable[[RuntimeStats], bool] | None = None) -> RuntimeStats:
        """Process until a stop is requested, ``until(stats)`` holds, or no work is left."""
        client = self.config.kafka.client_settings()
        admin = AdminClient(client)
        registry_read = time.monotonic()  # the outputs' lease runs from the registry read
        layout = prepare_app(self.app, admin, self.processor_id)
        watcher = ControlWatcher(client, self.config.control_topic)
        watcher.catch_up(watcher.end_offset())
        if not watcher.state.has_work(self.processor_id):
            watcher.close()
            raise SplitstateError(
                f"processor {self.processor_id} has no work: app {self.config.app_id!r} runs "
                f"processors 0..{(watcher.state.processors or 1) - 1} and no scale adds it. "
                "Fix: use an id in that range, or scale first (`splitstate scale`)."
            )
        identity = DatabaseIdentity(
            self.config.app_id, self.processor_id, layout.fixed_parameters()
        )
        path = processor_path(self.config.app_state_dir, self.processor_id)
        database = ProcessorDatabase.open(path, identity, self.app.store_specs())
        watcher.record_in(database)  # notes the generation seen (control_guard)
        # outputs may be other apps' inputs: place them under the registry's lease too
        outputs = RegistryLease(TopicRegistry(client, admin), layout.outputs, read_at=registry_read)
        session = Session(
            layout=layout,
            database=database,
            consumer=Consumer(
                {
                    **client,
                    "group.id": self.config.app_id,
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                    "auto.offset.reset": "earliest",
                }
            ),
            producer=Producer(
                {
                    **client,
                    "enable.idempotence": True,
                    "linger.ms": 5,
                    "delivery.timeout.ms": outputs.delivery_timeout_ms,
                }
            ),
            watcher=watcher,
            control=ControlLog(client, admin, self.config.control_topic),
            records=RecordProcessor(
                self.app,
                {name: entry.initial_partitions for name, entry in layout.inputs.items()},
                database.progress(UNFENCED_SCOPE),
            ),
            outputs=outputs,
            topics=TopicWatcher(client, list(layout.inputs), layout.inputs),
            moved=MovedKeys(self.processor_id, database),
        )
        outputs.start(session.producer)
        session.topics.poll(force=True)
        session.topics.record_hash(session.control, watcher.state.metadata_hash, starting=True)
        self._adopt_topics(session)
        try:
            self._assign(session, self._ungated(session, session.owned_now(self.processor_id)))
            log.info(
                "processor %d of %s: partitions %s, state in %s",
                self.processor_id,
                self.config.app_id,
                sorted(f"{t}[{p}]" for t, p in session.owned),
                path,
            )
            try:
                self._coordinate(session)
                self._loop(session, until)
            except ProcessorStoppedError as error:
                self._report_stop(session, error)
                raise
        finally:
            session.producer.flush(30)
            session.outputs.close()
            if session.catchup is not None:
                session.catchup.close()
            watcher.close()
            session.consumer.close()
            database.close()
        return self.stats

    def _report_stop(self, session: Session, error: ProcessorStoppedError) -> None:
        """A receiver that stops during a scale says why in the control log (for ``status``)."""
        scale = session.watcher.state.scaling
        if scale is None or not scale.incoming(self.processor_id):
            return
        try:
            session.control.append(
                {
                    "type": "stopped",
                    "generation": scale.generation,
                    "processor": self.processor_id,
                    "reason": str(error),
                }
            )
        except SplitstateError as failure:
            log.warning("could not record the stop in the control log: %s", failure)

    def _adopt_topics(self, session: Session) -> None:
        """Take the registry's current view of the input topics (a growth, its thresholds)."""
        entries = session.topics.entries
        before = session.counts
        session.layout = replace(
            session.layout,
            inputs={name: entries.get(name, e) for name, e in session.layout.inputs.items()},
        )
        for name, count in session.counts.items():
            if count != before.get(name):
                log.info(
                    "processor %d: input %s now has %d partitions (was %d); keys stay on "
                    "their processors",
                    self.processor_id,
                    name,
                    count,
                    before.get(name, 0),
                )

    def _ungated(self, session: Session, owned: set[Position]) -> set[Position]:
        """``owned`` less the new partitions a growth's ordering gate still holds back."""
        session.gates_checked = time.monotonic()
        candidates = owned - session.owned
        if not candidates:
            session.blocked = {}
            return owned
        offsets = session.database.offsets()
        committed: dict[Position, int] = {}

        def parent_position(position: Position) -> int | None:
            if position in owned:
                return offsets.get(position)
            if not committed:
                others = [TopicPartition(t, p) for t, p in session.layout.input_positions()]
                for tp in session.consumer.committed(others, timeout=30):
                    if tp.offset >= 0:
                        committed[(tp.topic, tp.partition)] = tp.offset
            return committed.get(position)

        blocked = blocked_partitions(session.layout.inputs, candidates, offsets, parent_position)
        for position in blocked.keys() - session.blocked.keys():
            log.info(
                "processor %d: %s[%d] is held back: %s",
                self.processor_id,
                *position,
                blocked[position],
            )
        for position in session.blocked.keys() - blocked.keys():
            log.info("processor %d: %s[%d] may be read now", self.processor_id, *position)
        session.blocked = blocked
        return owned - set(blocked)

    def _assign(self, session: Session, owned: set[Position]) -> None:
        """Make the consumer read exactly ``owned``, each from the state's offset."""
        added, removed = owned - session.owned, session.owned - owned
        if removed:
            session.consumer.incremental_unassign([TopicPartition(t, p) for t, p in removed])
        if added:
            state_offsets = session.database.offsets()
            committed = session.consumer.committed(
                [TopicPartition(t, p) for t, p in added], timeout=30
            )
            # stop rather than let the consumer skip records retention deleted unread
            check_retained(
                self.processor_id,
                session.consumer,
                {
                    (tp.topic, tp.partition): (
                        state_offsets.get((tp.topic, tp.partition)),
                        tp.offset if tp.offset >= 0 else None,
                    )
                    for tp in committed
                },
                grown={
                    (name, p)
                    for name, entry in session.layout.inputs.items()
                    for p in range(entry.initial_partitions, entry.partitions)
                },
            )
            starts = []
            behind = []
            for tp in committed:
                position = (tp.topic, tp.partition)
                start = state_offsets.get(position)
                if tp.offset >= 0 and tp.offset > (start or 0):
                    # The group processed records this state lacks (a lost state directory):
                    # rebuild them without repeating their outputs.
                    check_rebuildable(self.processor_id, session, position, owned, start)
                    session.restore_below[position] = tp.offset
                    log.warning(
                        "processor %d: rebuilding %s[%d] up to %d without output",
                        self.processor_id,
                        tp.topic,
                        tp.partition,
                        tp.offset,
                    )
                elif start is not None and tp.offset < start:
                    # state built elsewhere (a backfill, a catch-up): the group's offset is T1
                    # for catch-ups reading this partition, so it says what the state holds
                    behind.append(TopicPartition(tp.topic, tp.partition, start))
                starts.append(
                    TopicPartition(
                        tp.topic, tp.partition, OFFSET_BEGINNING if start is None else start
                    )
                )
            if behind:
                session.consumer.commit(offsets=behind, asynchronous=False)
            session.consumer.incremental_assign(starts)
        session.owned = set(owned)

    # -- the loop --------------------------------------------------------------------------

    def _loop(self, session: Session, until: Callable[[RuntimeStats], bool] | None) -> None:
        last_log = time.monotonic()
        while not self._stopping and (until is None or not until(self.stats)):
            if session.watcher.poll():
                self._coordinate(session)
            if session.topics.poll():
                self._adopt_topics(session)
                self._coordinate(session)
            session.topics.record_hash(session.control, session.watcher.state.metadata_hash)
            if session.blocked and time.monotonic() - session.gates_checked > _GATE_SECONDS:
                self._assign(session, self._ungated(session, session.owned_now(self.processor_id)))
            if not session.watcher.state.has_work(self.processor_id):
                session.moved.finish()
                log.info(
                    "processor %d has no partitions left; it stops. Its state stays in %s "
                    "until you remove it.",
                    self.processor_id,
                    session.database.path,
                )
                break
            wait = 0.0 if session.catchup is not None else self.config.batch.max_wait_ms / 1000
            if session.owned:
                self._process_batch(session, wait)
                self._release_ready(session)
            elif session.catchup is None or session.catchup.bootstrapping:
                time.sleep(self.config.batch.max_wait_ms / 1000)
            if session.catchup is not None:
                self._catch_up(session)
            if session.moved.pending:
                session.moved.step()
            now = time.monotonic()
            if now - last_log >= _LOG_EVERY_SECONDS:
                self._log_progress(session, now)
                last_log = now
        committed = committable(
            session, {p: o for p, o in session.database.offsets().items() if p in session.owned}
        )
        if committed:
            try:
                session.consumer.commit(
                    offsets=[TopicPartition(t, p, o) for (t, p), o in committed.items()],
                    asynchronous=False,
                )
            except KafkaException as error:
                log.warning("final consumer group commit failed: %s", error)

    def _process_batch(self, session: Session, wait: float) -> None:
        if not session.outputs.fresh():
            # the output counts may be stale: process nothing until the registry is readable
            now = time.monotonic()
            if now - self._lease_warned > _LOG_EVERY_SECONDS:
                self._lease_warned = now
                log.warning(
                    "processor %d: cannot re-read the topic registry within the output "
                    "topics' lease; processing waits (outputs could land on the wrong "
                    "partition). Fix: make Kafka reachable.",
                    self.processor_id,
                )
            time.sleep(0.5)
            return
        runner = self._runner
        if runner is None or runner.session is not session:
            runner = BatchRunner(self.config, self.processor_id, session, self._stopped)
            self._runner = runner
        messages = session.consumer.consume(
            num_messages=runner.max_records(), timeout=max(wait, 0.01)
        )
        if not messages:
            return
        result = runner.run(messages, self._usable)
        commits = committable(session, result.next_offsets)
        if commits:
            session.consumer.commit(
                offsets=[TopicPartition(t, p, o) for (t, p), o in commits.items()],
                asynchronous=True,
            )
        self.stats.records += result.processed
        self.stats.restored += result.restored
        self.stats.outputs += result.outputs
        self.stats.dead_letters += result.dead_letters
        self.stats.batches += 1

    # -- output ----------------------------------------------------------------------------

    def _stopped(self) -> bool:
        return self._stopping

    def _usable(self, message: Message) -> bool:
        error = message.error()
        if error is None:
            return True
        if error.fatal():
            raise SplitstateError(f"Kafka consumer failed: {error}")
        if error.code() != KafkaError._PARTITION_EOF:
            log.warning("consumer: %s", error)
        return False

    def _log_progress(self, session: Session, now: float) -> None:
        elapsed = max(now - self.stats.started, 1e-9)
        catching = ""
        if session.catchup is not None and session.catchup.bootstrapping:
            catching = ", building gained keys with Spark (see `splitstate status`)"
        elif session.catchup is not None:
            catching = (
                f", catching up (lag {session.catchup.lag()}, {session.catchup.applied} applied)"
            )
        log.info(
            "processor %d: %d records (%.0f/s), %d restored, %d outputs, %d dead letters%s",
            self.processor_id,
            self.stats.records,
            self.stats.records / elapsed,
            self.stats.restored,
            self.stats.outputs,
            self.stats.dead_letters,
            catching,
        )
