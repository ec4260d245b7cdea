"""``Clients``: the Kafka port over confluent-kafka, for one cluster's client settings."""

from __future__ import annotations

import struct
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer, TopicCollection
from confluent_kafka import Message as ConfluentMessage
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic, ResourceType

from framework.clock import SYSTEM_CLOCK, Clock
from framework.config import AppConfig
from framework.kafka.client_logs import with_logger
from framework.kafka.confluent_consumer import TIMEOUT, ConfluentConsumer, io_error
from framework.kafka.confluent_producer import ConfluentProducer
from framework.kafka.confluent_transactions import ConfluentTransactionalProducer
from framework.kafka.errors import KafkaIOError, UnknownPartitionError
from framework.kafka.port import (
    Isolation,
    Kafka,
    KafkaConsumer,
    KafkaProducer,
    LogRecord,
    OffsetReset,
    TopicDescription,
    TopicSpec,
    TransactionalProducer,
)
from framework.kafka.reach import check_reachable
from framework.kafka.settings_check import check_kafka_settings

__all__ = ["Clients"]

_GROW_SECONDS = 60.0
#: consumers' first backoff before a request is retried (see ``Clients.consumer``)
_RETRY_BACKOFF_MS = 10


class Clients(Kafka):
    """Every consumer, producer and admin client of one process for the cluster of
    ``settings`` (``bootstrap.servers``, security: ``KafkaConfig.client_settings``).

    The admin client and the producer that serves ``append`` (the control log's and the
    topic registry's) are made once, when first needed, and kept. Before the first client,
    ``check_reachable`` makes sure a broker answers (else it says what was tried and the fix).
    """

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.settings = dict(settings)
        self.clock: Clock = SYSTEM_CLOCK
        self._lock = threading.Lock()
        self._admin: AdminClient | None = None
        self._appender: Producer | None = None
        self._reached = False
        self._reach_lock = threading.Lock()

    @classmethod
    def of(cls, config: AppConfig) -> Clients:
        """The clients of ``config``'s cluster (``ConfigError`` when librdkafka refuses its
        ``kafka.settings``)."""
        check_kafka_settings(config.kafka.settings)
        return cls(config.kafka.client_settings())

    # -- clients ---------------------------------------------------------------------------

    def _reach(self) -> None:
        """Once, before the first client: return when a broker answers, else raise
        ``KafkaUnreachableError`` (``check_reachable``)."""
        if self._reached:
            return
        with self._reach_lock:
            if not self._reached:
                check_reachable(self.settings)
                self._reached = True

    def consumer(
        self,
        group_id: str,
        *,
        reset: OffsetReset | None = None,
        store_offsets: bool = True,
        name: str = "consumer",
        isolation: Isolation = "read_committed",
    ) -> KafkaConsumer:
        """A new consumer in group ``group_id`` that never commits on its own."""
        self._reach()
        settings: dict[str, Any] = {
            "isolation.level": "read_committed",  # an input may be a transactional output
            # read_committed asks for stable group offsets: right after a transaction that
            # committed some, the broker answers UNSTABLE_OFFSET_COMMIT until the transaction's
            # markers are written (a few ms later), and librdkafka asks again after
            # retry.backoff.ms (100 ms by default, doubling up to retry.backoff.max.ms). An old
            # owner's release, a takeover and a catch-up's T1 all ask right after one.
            "retry.backoff.ms": _RETRY_BACKOFF_MS,
            **self.settings,
            "group.id": group_id,
            "enable.auto.commit": False,
        }
        if isolation != "read_committed":
            settings["isolation.level"] = isolation  # asked for: over the settings
        if not store_offsets:
            settings["enable.auto.offset.store"] = False
        if reset is not None:
            settings["auto.offset.reset"] = reset
        return ConfluentConsumer(settings, name)

    def producer(
        self,
        *,
        linger_ms: int | None = None,
        delivery_timeout_ms: int | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> KafkaProducer:
        """A new idempotent producer (``settings`` last: the user's override ours)."""
        self._reach()
        wanted = self._producer_settings(linger_ms, delivery_timeout_ms, settings)
        try:
            return ConfluentProducer(Producer(with_logger(wanted)))
        except KafkaException as error:
            raise io_error(error) from None

    def transactional_producer(
        self,
        transactional_id: str,
        *,
        linger_ms: int | None = None,
        delivery_timeout_ms: int | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> TransactionalProducer:
        """A new producer with ``transactional_id``, its transactions initialised."""
        self._reach()
        wanted = self._producer_settings(linger_ms, delivery_timeout_ms, settings)
        wanted["transactional.id"] = transactional_id
        # librdkafka refuses a delivery timeout longer than the transaction timeout (60 s by
        # default): a topic registered with a longer one gets a transaction timeout to match
        delivery = int(wanted.get("delivery.timeout.ms", 0))
        wanted.setdefault("transaction.timeout.ms", max(60_000, delivery))
        try:
            return ConfluentTransactionalProducer(Producer(with_logger(wanted)))
        except KafkaException as error:
            raise io_error(error) from None

    def _producer_settings(
        self,
        linger_ms: int | None = None,
        delivery_timeout_ms: int | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        wanted: dict[str, Any] = {**self.settings, "enable.idempotence": True}
        if linger_ms is not None:
            wanted["linger.ms"] = linger_ms
        if delivery_timeout_ms is not None:
            wanted["delivery.timeout.ms"] = delivery_timeout_ms
        return {**wanted, **(settings or {})}

    @property
    def admin(self) -> AdminClient:
        """The admin client (made on first use; each use first serves its log lines)."""
        self._reach()
        with self._lock:
            if self._admin is None:
                try:
                    self._admin = AdminClient(with_logger(self.settings))
                except KafkaException as error:
                    raise io_error(error) from None
            self._admin.poll(0)
            return self._admin

    # -- topics ----------------------------------------------------------------------------

    def partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        """Current partition count of each existing topic among ``topics``."""
        wanted = set(topics)
        try:
            metadata = self.admin.list_topics(timeout=TIMEOUT)
        except KafkaException as error:
            raise KafkaIOError(
                f"could not read Kafka metadata: {error}. Fix: check kafka.bootstrap_servers "
                "and that the broker runs (`splitstate broker status`)."
            ) from None
        return {
            name: len(topic.partitions)
            for name, topic in metadata.topics.items()
            if name in wanted and topic.error is None
        }

    def create_topics(self, specs: Sequence[TopicSpec]) -> list[str]:
        """Create the topics of ``specs`` that do not exist; returns the names created."""
        existing = self.partition_counts([spec.name for spec in specs])
        missing = [spec for spec in specs if spec.name not in existing]
        if not missing:
            return []
        new = [
            NewTopic(
                spec.name,
                num_partitions=spec.partitions,
                replication_factor=spec.replication_factor,
                config=dict(spec.config or {}),
            )
            for spec in missing
        ]
        try:
            futures = self.admin.create_topics(new)
        except KafkaException as error:
            raise io_error(error) from None
        created = []
        for name, future in futures.items():
            try:
                future.result(timeout=TIMEOUT)
                created.append(name)
            except KafkaException as error:
                if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise KafkaIOError(f"could not create topic {name!r}: {error}") from None
        self._wait_for_metadata(created)
        return created

    def _wait_for_metadata(self, topics: Sequence[str]) -> None:
        deadline = time.monotonic() + TIMEOUT
        while topics and time.monotonic() < deadline:
            if set(self.partition_counts(topics)) == set(topics):
                return
            time.sleep(0.1)

    def create_partitions(self, topic: str, count: int) -> None:
        """Grow ``topic`` to ``count`` partitions."""
        try:
            futures = self.admin.create_partitions([NewPartitions(topic, count)])
            futures[topic].result(_GROW_SECONDS)
        except KafkaException as error:
            raise io_error(error) from None
        deadline = time.monotonic() + TIMEOUT  # until the metadata shows them, as for topics
        while self.partition_counts([topic]).get(topic, 0) < count:
            if time.monotonic() > deadline:
                raise KafkaIOError(f"Kafka metadata of {topic!r} lacks its new partitions")
            time.sleep(0.1)

    def topic_configs(self, topics: Sequence[str]) -> dict[str, dict[str, str | None]]:
        """Each existing topic's configs; missing topics are left out."""
        resources = [ConfigResource(ResourceType.TOPIC, topic) for topic in topics]
        if not resources:
            return {}
        try:
            futures = self.admin.describe_configs(resources)
        except KafkaException as error:
            raise KafkaIOError(f"could not read the configs of {list(topics)}: {error}") from None
        found: dict[str, dict[str, str | None]] = {}
        for resource, future in futures.items():
            topic = resource.name
            try:
                configs = future.result(timeout=TIMEOUT)
            except KafkaException as error:
                if error.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    continue
                raise KafkaIOError(
                    f"could not read the config of {topic!r}: {error}. Fix: make Kafka reachable."
                ) from None
            found[topic] = {name: entry.value for name, entry in configs.items()}
        return found

    def describe_topics(self, topics: Sequence[str]) -> dict[str, TopicDescription]:
        """Each topic's id and replica racks."""
        result: dict[str, TopicDescription] = {}
        try:
            described = self.admin.describe_topics(TopicCollection(list(topics)))
            descriptions = {name: future.result(TIMEOUT) for name, future in described.items()}
        except KafkaException as error:
            raise io_error(error) from None
        for name, description in descriptions.items():
            raw = struct.pack(
                ">qq",
                description.topic_id.get_most_significant_bits(),
                description.topic_id.get_least_significant_bits(),
            )
            racks = tuple(
                tuple(node.rack for node in partition.replicas if node.rack)
                for partition in sorted(description.partitions, key=lambda p: p.id)
            )
            result[name] = TopicDescription(name, uuid.UUID(bytes=raw), racks)
        return result

    # -- coordination logs -----------------------------------------------------------------

    def read_log(self, topic: str, partition: int = 0) -> list[LogRecord]:
        """Every record of ``topic[partition]`` from its start to its current end."""
        self._reach()
        settings = {
            **self.settings,
            "group.id": f"splitstate-reader-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
        position = (topic, partition)
        consumer = ConfluentConsumer(settings, f"reading {topic!r}", strict=True)
        try:
            records = _read_to_end(consumer, position)
        except UnknownPartitionError:
            return []
        except KafkaIOError as error:
            if consumer.failed:
                raise  # an error while reading, named as such
            raise KafkaIOError(f"could not read {topic!r}: {error}") from None
        finally:
            consumer.close()
        if records is None:
            raise KafkaIOError(f"reading {topic!r} to its end took over {TIMEOUT:.0f}s")
        return records

    def append(self, topic: str, records: Sequence[tuple[bytes, bytes | None]]) -> int:
        """Write ``records`` to partition 0 of ``topic`` (a value ``None``: a tombstone) and
        wait until all are written; returns the offset after the last of them (as their
        delivery reports say)."""
        failures: list[str] = []
        ends: list[int] = []

        def delivered(error: KafkaError | None, message: ConfluentMessage) -> None:
            offset = message.offset()
            if error is not None:
                failures.append(str(error))
            elif offset is not None and offset >= 0:
                ends.append(offset + 1)

        try:
            producer = self._shared_producer()
        except KafkaException as error:
            raise io_error(error) from None
        try:
            for key, value in records:
                producer.produce(topic, key=key, value=value, partition=0, on_delivery=delivered)
            remaining = producer.flush(TIMEOUT)
        except KafkaException as error:
            failures.append(str(error))
            remaining = 0
        if remaining or failures:
            self._drop_producer(producer)  # the next append starts with a fresh producer
            raise KafkaIOError(
                f"could not write to {topic!r}: {failures[:3] or f'{remaining} records unsent'}"
            )
        return max(ends, default=0)

    def prepare_appends(self) -> None:
        """Make the producer of ``append`` now: an idempotent producer asked to produce right
        after it was made can miss the broker while it swaps its bootstrap connection for the
        broker's own, and then waits half a second (librdkafka's retry) for its producer id;
        made a little ahead, it has the id by the first append."""
        try:
            self._shared_producer()
        except KafkaException as error:
            raise io_error(error) from None

    def _shared_producer(self) -> Producer:
        self._reach()
        with self._lock:
            if self._appender is None:
                self._appender = Producer(with_logger(self._producer_settings()))
            return self._appender

    def _drop_producer(self, producer: Producer) -> None:
        with self._lock:
            if self._appender is producer:
                self._appender = None

    def close(self) -> None:
        """Wait for the appends' producer (appends wait for their records anyway), then let
        it and the admin client go: their connections close now, not when the process
        ends (a later use makes new ones)."""
        with self._lock:
            producer, self._appender = self._appender, None
            admin, self._admin = self._admin, None
        if producer is not None:
            producer.flush(TIMEOUT)
        if admin is not None:
            admin.poll(0)  # its last log lines


def _read_to_end(consumer: ConfluentConsumer, position: tuple[str, int]) -> list[LogRecord] | None:
    """Every record of ``position`` up to its end now; ``None`` when that takes too long."""
    offsets = consumer.watermarks([position])[position]
    end = offsets.end
    if end <= offsets.start:
        return []
    consumer.assign({position: None})
    records: list[LogRecord] = []
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        for message in consumer.consume_ready(1000, 0.5):
            offset = message.offset()
            where = -1 if offset is None else offset
            records.append(LogRecord(where, message.key(), message.value()))
            if offset is not None and offset + 1 >= end:
                return records
        if position in consumer.ended:
            return records
    return None
