"""One processor's single-threaded loop (seed 004): poll, process, produce, commit.

Per batch, in this order:

1. poll up to ``batch.max_records`` records from the assigned partitions;
2. run the processor function on each, collecting outputs and dead letters;
3. produce them and wait until Kafka has them all (``flush``);
4. commit the state changes and the next input offsets as one RocksDB WriteBatch;
5. commit those offsets to the app's consumer group (T1).

A crash before 4 replays the batch from the old offsets (state untouched, outputs repeated:
at-least-once output); after 4 the batch is never applied again: exactly-once state.
Records the consumer group had already committed when the processor started, but that its
local state lacks (a lost state directory), are replayed in restore mode: state is rebuilt
without repeating their outputs.
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
from framework.errors import SplitstateError
from framework.layout import AppLayout, prepare_app
from framework.processing import DeadLetter, EncodedOutput, RecordProcessor
from framework.producer import LinearHashPartitioner
from rebalance import bucket
from statestore import DatabaseIdentity, ProcessorDatabase, processor_path

__all__ = ["ProcessorRuntime", "RuntimeStats"]

log = logging.getLogger(__name__)
_LOG_EVERY_SECONDS = 10.0


@dataclass
class RuntimeStats:
    """Counters of one processor run."""

    records: int = 0
    restored: int = 0
    outputs: int = 0
    dead_letters: int = 0
    batches: int = 0
    started: float = field(default_factory=time.monotonic)


class ProcessorRuntime:
    """Runs processor ``processor_id`` of ``app`` until stopped."""

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

    def run(self, until: Callable[[RuntimeStats], bool] | None = None) -> RuntimeStats:
        """Process until a stop is requested (or ``until(stats)`` is true)."""
        client = self.config.kafka.client_settings()
        admin = AdminClient(client)
        layout = prepare_app(self.app, admin)
        if not 0 <= self.processor_id < layout.processors:
            raise SplitstateError(
                f"processor id {self.processor_id} does not exist: app {self.config.app_id!r} "
                f"runs processors 0..{layout.processors - 1}. Fix: use an id in that range."
            )
        assignment = self._assignment(layout)
        identity = DatabaseIdentity(
            self.config.app_id, self.processor_id, layout.fixed_parameters()
        )
        path = processor_path(self.config.app_state_dir, self.processor_id)
        database = ProcessorDatabase.open(path, identity, self.app.store_specs())
        consumer = Consumer(
            {
                **client,
                "group.id": self.config.app_id,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
            }
        )
        producer = Producer({**client, "enable.idempotence": True, "linger.ms": 5})
        try:
            restore_below = self._start(consumer, database, assignment)
            log.info(
                "processor %d of %s: %d partitions %s, state in %s",
                self.processor_id,
                self.config.app_id,
                len(assignment),
                [f"{t}[{p}]" for t, p in assignment],
                path,
            )
            self._loop(
                layout, consumer, producer, database, restore_below=restore_below, until=until
            )
        finally:
            producer.flush(30)
            consumer.close()
            database.close()
        return self.stats

    def _assignment(self, layout: AppLayout) -> list[tuple[str, int]]:
        b, p = layout.initial_processors, layout.processors
        return [
            (name, partition)
            for name, entry in layout.inputs.items()
            for partition in range(entry.partitions)
            if bucket(partition, b, p) == self.processor_id
        ]

    def _start(
        self, consumer: Consumer, database: ProcessorDatabase, assignment: list[tuple[str, int]]
    ) -> dict[tuple[str, int], int]:
        """Assign the partitions at the state's offsets; returns restore-mode bounds."""
        state_offsets = database.offsets()
        committed = consumer.committed([TopicPartition(t, p) for t, p in assignment], timeout=30)
        restore_below: dict[tuple[str, int], int] = {}
        starts = []
        for tp in committed:
            position = (tp.topic, tp.partition)
            start = state_offsets.get(position)
            if tp.offset is not None and tp.offset >= 0 and tp.offset > (start or 0):
                restore_below[position] = tp.offset
            starts.append(
                TopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING if start is None else start)
            )
        consumer.assign(starts)
        if restore_below:
            log.warning(
                "processor %d: local state lacks records the group already processed; "
                "rebuilding them without output: %s",
                self.processor_id,
                restore_below,
            )
        return restore_below

    def _loop(
        self,
        layout: AppLayout,
        consumer: Consumer,
        producer: Producer,
        database: ProcessorDatabase,
        *,
        restore_below: dict[tuple[str, int], int],
        until: Callable[[RuntimeStats], bool] | None,
    ) -> None:
        processor = RecordProcessor(self.app)
        partitioner = LinearHashPartitioner(layout.outputs)
        max_records = self.config.batch.max_records
        wait = self.config.batch.max_wait_ms / 1000
        dead_letter_topic = self.config.dead_letters
        last_log = time.monotonic()
        while not self._stopping and (until is None or not until(self.stats)):
            messages = consumer.consume(num_messages=max_records, timeout=wait)
            if not messages:
                continue
            batch = database.begin()
            outputs: list[EncodedOutput] = []
            dead: list[DeadLetter] = []
            next_offsets: dict[tuple[str, int], int] = {}
            for message in messages:
                if message.error() is not None and not self._usable(message):
                    continue
                topic, partition, offset = _coordinates(message)
                bound = restore_below.get((topic, partition))
                restore = bound is not None and offset < bound
                produced, dead_letter = processor.process(
                    batch, message, topic, partition, offset, restore=restore
                )
                outputs.extend(produced)
                if dead_letter is not None:
                    dead.append(dead_letter)
                next_offsets[(topic, partition)] = offset + 1
                if restore:
                    self.stats.restored += 1
                else:
                    self.stats.records += 1
            self._produce(producer, partitioner, outputs, dead, dead_letter_topic=dead_letter_topic)
            for (topic, partition), next_offset in next_offsets.items():
                batch.set_offset(topic, partition, next_offset)
            batch.commit()
            if next_offsets:
                consumer.commit(
                    offsets=[TopicPartition(t, p, o) for (t, p), o in next_offsets.items()],
                    asynchronous=True,
                )
            self.stats.outputs += len(outputs)
            self.stats.dead_letters += len(dead)
            self.stats.batches += 1
            now = time.monotonic()
            if now - last_log >= _LOG_EVERY_SECONDS:
                self._log_progress(now)
                last_log = now
        committed = database.offsets()
        if committed:
            try:
                consumer.commit(
                    offsets=[TopicPartition(t, p, o) for (t, p), o in committed.items()],
                    asynchronous=False,
                )
            except KafkaException as error:
                log.warning("final consumer group commit failed: %s", error)

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
        self,
        producer: Producer,
        partitioner: LinearHashPartitioner,
        outputs: list[EncodedOutput],
        dead: list[DeadLetter],
        *,
        dead_letter_topic: str,
    ) -> None:
        """Produce outputs and dead letters and wait for all of them (or raise)."""
        if not outputs and not dead:
            return
        errors = self._delivery_errors
        errors.clear()

        def delivered(error: KafkaError | None, _message: Message) -> None:
            if error is not None:
                errors.append(str(error))

        produce, place = producer.produce, partitioner.partition
        for output in outputs:
            topic, key = output.topic, output.key
            try:
                headers = list(output.headers) if output.headers else None
                produce(
                    topic,
                    output.value,
                    key,
                    place(topic, key),
                    on_delivery=delivered,
                    headers=headers,
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
                dead_letter_topic,
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

    def _log_progress(self, now: float) -> None:
        elapsed = max(now - self.stats.started, 1e-9)
        log.info(
            "processor %d: %d records (%.0f/s), %d restored, %d outputs, %d dead letters",
            self.processor_id,
            self.stats.records,
            self.stats.records / elapsed,
            self.stats.restored,
            self.stats.outputs,
            self.stats.dead_letters,
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
