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
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

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
from framework.bootstrap_run import BootstrapRun
from framework.catchup import BootstrapStarter, CatchUp
from framework.control_watch import ControlWatcher
from framework.controllog import ControlLog
from framework.errors import SplitstateError
from framework.faults import maybe_crash
from framework.layout import AppLayout, prepare_app
from framework.processing import DeadLetter, EncodedOutput, RecordProcessor
from framework.producer import LinearHashPartitioner
from rebalance import HandoffEvent, HandoffPhase, bucket, key_hash
from rebalance.control import Handoff, Scale, handoff_record
from statestore import DatabaseIdentity, ProcessorDatabase, processor_path
from statestore.spark import OffsetRange

__all__ = ["ProcessorRuntime", "RuntimeStats"]

log = logging.getLogger(__name__)
_LOG_EVERY_SECONDS = 10.0
Position = tuple[str, int]


@dataclass
class RuntimeStats:
    """Counters of one processor run."""

    records: int = 0
    restored: int = 0
    outputs: int = 0
    dead_letters: int = 0
    batches: int = 0
    started: float = field(default_factory=time.monotonic)


@dataclass
class _Session:
    """Everything one run of a processor holds."""

    layout: AppLayout
    database: ProcessorDatabase
    consumer: Consumer
    producer: Producer
    watcher: ControlWatcher
    control: ControlLog
    records: RecordProcessor
    partitioner: LinearHashPartitioner
    owned: set[Position] = field(default_factory=set)
    restore_below: dict[Position, int] = field(default_factory=dict)
    catchup: CatchUp | None = None
    sent: set[tuple[int, int, int, str]] = field(default_factory=set)
    released: dict[int, set[Position]] = field(default_factory=dict)

    def owned_now(self, processor: int) -> set[Position]:
        """What the control log says this processor owns, less what it released itself
        (its own RELEASE may not have come back through the log yet)."""
        state = self.watcher.state
        owned = state.owned(processor, self.counts)
        scale = state.scaling
        if scale is not None:
            owned -= self.released.get(scale.generation, set())
        return owned

    @property
    def counts(self) -> dict[str, int]:
        """Each input topic's partition count."""
        return {name: entry.partitions for name, entry in self.layout.inputs.items()}


class ProcessorRuntime:
    """Runs processor ``processor_id`` of ``app`` until stopped (or it has no work left)."""

    def __init__(self, app: App, processor_id: int) -> None:
        self.app = app
        self.processor_id = processor_id
        self.config = app.config
        self.stats = RuntimeStats()
        self._stopping = False
        self._delivery_errors: list[str] = []

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
        layout = prepare_app(self.app, admin)
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
        session = _Session(
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
            producer=Producer({**client, "enable.idempotence": True, "linger.ms": 5}),
            watcher=watcher,
            control=ControlLog(client, admin, self.config.control_topic),
            records=RecordProcessor(self.app),
            partitioner=LinearHashPartitioner(layout.outputs),
        )
        try:
            self._assign(session, session.owned_now(self.processor_id))
            log.info(
                "processor %d of %s: partitions %s, state in %s",
                self.processor_id,
                self.config.app_id,
                sorted(f"{t}[{p}]" for t, p in session.owned),
                path,
            )
            self._coordinate(session)
            self._loop(session, until)
        finally:
            session.producer.flush(30)
            if session.catchup is not None:
                session.catchup.close()
            watcher.close()
            session.consumer.close()
            database.close()
        return self.stats

    def _assign(self, session: _Session, owned: set[Position]) -> None:
        """Make the consumer read exactly ``owned``, each from the state's offset."""
        added, removed = owned - session.owned, session.owned - owned
        if removed:
            session.consumer.incremental_unassign([TopicPartition(t, p) for t, p in removed])
        if added:
            state_offsets = session.database.offsets()
            committed = session.consumer.committed(
                [TopicPartition(t, p) for t, p in added], timeout=30
            )
            starts = []
            for tp in committed:
                position = (tp.topic, tp.partition)
                start = state_offsets.get(position)
                if tp.offset >= 0 and tp.offset > (start or 0):
                    # The group processed records this state lacks (a lost state directory):
                    # rebuild them without repeating their outputs.
                    session.restore_below[position] = tp.offset
                    log.warning(
                        "processor %d: rebuilding %s[%d] up to %d without output",
                        self.processor_id,
                        tp.topic,
                        tp.partition,
                        tp.offset,
                    )
                starts.append(
                    TopicPartition(
                        tp.topic, tp.partition, OFFSET_BEGINNING if start is None else start
                    )
                )
            session.consumer.incremental_assign(starts)
        session.owned = set(owned)

    # -- the loop --------------------------------------------------------------------------

    def _loop(self, session: _Session, until: Callable[[RuntimeStats], bool] | None) -> None:
        last_log = time.monotonic()
        while not self._stopping and (until is None or not until(self.stats)):
            if session.watcher.poll():
                self._coordinate(session)
            if not session.watcher.state.has_work(self.processor_id):
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
            now = time.monotonic()
            if now - last_log >= _LOG_EVERY_SECONDS:
                self._log_progress(session, now)
                last_log = now
        committed = {p: o for p, o in session.database.offsets().items() if p in session.owned}
        if committed:
            try:
                session.consumer.commit(
                    offsets=[TopicPartition(t, p, o) for (t, p), o in committed.items()],
                    asynchronous=False,
                )
            except KafkaException as error:
                log.warning("final consumer group commit failed: %s", error)

    def _process_batch(self, session: _Session, wait: float) -> None:
        messages = session.consumer.consume(
            num_messages=self.config.batch.max_records, timeout=max(wait, 0.01)
        )
        if not messages:
            return
        batch = session.database.begin()
        outputs: list[EncodedOutput] = []
        dead: list[DeadLetter] = []
        next_offsets: dict[Position, int] = {}
        restore_below, owned = session.restore_below, session.owned
        processed = restored = 0
        for message in messages:
            if message.error() is not None and not self._usable(message):
                continue
            topic, partition, offset = _coordinates(message)
            if (topic, partition) not in owned:
                continue  # fetched before the partition was released
            bound = restore_below.get((topic, partition))
            restore = bound is not None and offset < bound
            produced, dead_letter = session.records.process(
                batch, message, topic, partition, offset, restore=restore
            )
            outputs.extend(produced)
            if dead_letter is not None:
                dead.append(dead_letter)
            next_offsets[(topic, partition)] = offset + 1
            if restore:
                restored += 1
            else:
                processed += 1
        self._produce(session, outputs, dead)
        for (topic, partition), next_offset in next_offsets.items():
            batch.set_offset(topic, partition, next_offset)
        batch.commit()
        if next_offsets:
            session.consumer.commit(
                offsets=[TopicPartition(t, p, o) for (t, p), o in next_offsets.items()],
                asynchronous=True,
            )
        self.stats.records += processed
        self.stats.restored += restored
        self.stats.outputs += len(outputs)
        self.stats.dead_letters += len(dead)
        self.stats.batches += 1

    # -- the catch-up protocol -------------------------------------------------------------

    def _coordinate(self, session: _Session) -> None:
        """Act on the control state: ownership, joining a scale, releasing, completing."""
        state = session.watcher.state
        self._assign(session, session.owned_now(self.processor_id))
        scale = state.scaling
        incoming = (
            []
            if scale is None
            else [
                h for h in scale.incoming(self.processor_id) if h.phase is not HandoffPhase.COMPLETE
            ]
        )
        if scale is None or not incoming:
            if session.catchup is not None:
                session.catchup.close()
                session.catchup = None
            return
        if session.catchup is None or session.catchup.generation != scale.generation:
            if session.catchup is not None:
                session.catchup.close()
            assert state.app is not None
            session.catchup = CatchUp(
                self.processor_id,
                state.app.initial_processors,
                scale,
                client=self.config.kafka.client_settings(),
                group_id=self.config.app_id,
                database=session.database,
                records=session.records,
                bootstrap=self._bootstrap_starter(scale)
                if self.config.bootstrap == "spark"
                else None,
            )
        for handoff in incoming:
            if handoff.phase is HandoffPhase.PLANNED:
                self._send(session, scale.generation, handoff, HandoffEvent.START_CATCH_UP)
            elif handoff.phase is HandoffPhase.RELEASED:
                session.catchup.release(handoff)

    def _bootstrap_starter(self, scale: Scale) -> BootstrapStarter:
        def start(ranges: dict[Position, OffsetRange], covers: list[Position]) -> BootstrapRun:
            return BootstrapRun.start(
                self.app,
                processor=self.processor_id,
                generation=scale.generation,
                processors=scale.new_processors,
                ranges=ranges,
                covers=covers,
            )

        return start

    def _catch_up(self, session: _Session) -> None:
        catchup = session.catchup
        assert catchup is not None
        catchup.step(self.config.scaling.catchup_batch)
        scale = session.watcher.state.scaling
        if scale is None:
            return
        for handoff in scale.incoming(self.processor_id):
            if handoff.phase is HandoffPhase.CATCHING_UP and catchup.caught_up(
                handoff, self.config.scaling.ready_lag
            ):
                self._send(session, scale.generation, handoff, HandoffEvent.CAUGHT_UP)
            elif (
                handoff.phase is HandoffPhase.RELEASED
                and (scale.generation, handoff.source, handoff.target, "COMPLETE")
                not in session.sent
                and catchup.finished(handoff)
            ):
                catchup.complete(handoff)
                self._send(session, scale.generation, handoff, HandoffEvent.COMPLETE)
                elapsed = max(time.monotonic() - catchup.started, 1e-9)
                log.info(
                    "processor %d took over %s from processor %d at %s; replayed %d records "
                    "in %.1fs (%.0f/s)",
                    self.processor_id,
                    sorted(handoff.partitions),
                    handoff.source,
                    dict(handoff.released),
                    catchup.replayed,
                    elapsed,
                    catchup.replayed / elapsed,
                )

    def _release_ready(self, session: _Session) -> None:
        """At a batch boundary: give READY handoffs' partitions away at their offsets F."""
        scale = session.watcher.state.scaling
        if scale is None:
            return
        for handoff in scale.outgoing(self.processor_id):
            if handoff.phase is not HandoffPhase.READY:
                continue
            key = (scale.generation, handoff.source, handoff.target, HandoffEvent.RELEASE.value)
            if key in session.sent:
                continue
            moved = set(handoff.partitions)
            session.released.setdefault(scale.generation, set()).update(moved)
            self._assign(session, session.owned - moved)
            final = self._final_offsets(session, moved)
            session.consumer.commit(
                offsets=[TopicPartition(t, p, o) for (t, p), o in final.items()],
                asynchronous=False,
            )
            self._send(session, scale.generation, handoff, HandoffEvent.RELEASE, final)
            log.info(
                "processor %d released %s to processor %d at %s",
                self.processor_id,
                sorted(moved),
                handoff.target,
                final,
            )
            self._forget_moved_keys(session, handoff, scale.new_processors)

    def _final_offsets(self, session: _Session, moved: set[Position]) -> dict[Position, int]:
        offsets = session.database.offsets()
        final = {}
        for topic, partition in sorted(moved):
            if (topic, partition) in offsets:
                final[(topic, partition)] = offsets[(topic, partition)]
            else:
                low, _high = session.consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=30
                )
                final[(topic, partition)] = low
        return final

    def _forget_moved_keys(self, session: _Session, handoff: Handoff, processors: int) -> None:
        """Delete the state of keys that now belong to the receiver (it rebuilt them)."""
        state = session.watcher.state
        assert state.app is not None
        b, target = state.app.initial_processors, handoff.target
        deleted = session.database.delete_keys(
            lambda key: bucket(key_hash(key), b, processors) == target
        )
        log.info("processor %d deleted the state of %d moved keys", self.processor_id, deleted)

    def _send(
        self,
        session: _Session,
        generation: int,
        handoff: Handoff,
        event: HandoffEvent,
        offsets: dict[Position, int] | None = None,
    ) -> None:
        key = (generation, handoff.source, handoff.target, event.value)
        if key in session.sent:
            return
        session.sent.add(key)
        state_dir = self.config.app_state_dir
        maybe_crash(f"before:{event.value}", self.processor_id, state_dir)
        session.control.append(
            handoff_record(generation, handoff.source, handoff.target, event, offsets)
        )
        maybe_crash(f"after:{event.value}", self.processor_id, state_dir)
        log.info(
            "processor %d: generation %d handoff %d -> %d: %s",
            self.processor_id,
            generation,
            handoff.source,
            handoff.target,
            event.value,
        )

    # -- output ----------------------------------------------------------------------------

    def _usable(self, message: Message) -> bool:
        error = message.error()
        if error is None:
            return True
        if error.fatal():
            raise SplitstateError(f"Kafka consumer failed: {error}")
        if error.code() != KafkaError._PARTITION_EOF:
            log.warning("consumer: %s", error)
        return False

    def _produce(
        self, session: _Session, outputs: list[EncodedOutput], dead: list[DeadLetter]
    ) -> None:
        """Produce outputs and dead letters and wait for all of them (or raise)."""
        if not outputs and not dead:
            return
        producer = session.producer
        errors = self._delivery_errors
        errors.clear()

        def delivered(error: KafkaError | None, _message: Message) -> None:
            if error is not None:
                errors.append(str(error))

        produce, place = producer.produce, session.partitioner.partition
        for output in outputs:
            topic, key = output.topic, output.key
            try:
                produce(
                    topic,
                    output.value,
                    key,
                    place(topic, key),
                    on_delivery=delivered,
                    headers=output.headers,
                )
            except BufferError:
                _produce_one(
                    producer,
                    topic,
                    {
                        "key": key,
                        "value": output.value,
                        "partition": place(topic, key),
                        "headers": output.headers,
                        "on_delivery": delivered,
                    },
                )
        for letter in dead:
            _produce_one(
                producer,
                self.config.dead_letters,
                {
                    "key": letter.key,
                    "value": letter.value,
                    "headers": letter.kafka_headers(),
                    "on_delivery": delivered,
                },
            )
        remaining = producer.flush(60)
        if remaining or errors:
            raise SplitstateError(
                f"outputs could not be written ({remaining} unsent; errors: {errors[:3]}); the "
                "batch was not committed and will be processed again after a restart"
            )

    def _log_progress(self, session: _Session, now: float) -> None:
        elapsed = max(now - self.stats.started, 1e-9)
        catching = ""
        if session.catchup is not None:
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


def _coordinates(message: Message) -> tuple[str, int, int]:
    topic, partition, offset = message.topic(), message.partition(), message.offset()
    if topic is None or partition is None or offset is None:
        raise SplitstateError("Kafka delivered a record without topic, partition or offset")
    return topic, partition, offset


def _produce_one(producer: Producer, topic: str, arguments: dict[str, Any]) -> None:
    """``producer.produce`` that waits for room when the local queue is full."""
    while True:
        try:
            producer.produce(topic, **arguments)
            return
        except BufferError:
            producer.poll(0.1)
