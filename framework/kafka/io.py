"""Small Kafka helpers over confluent-kafka: topics, logs read to their end, sync appends."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from framework.errors import SplitstateError
from rebalance.positions import OffsetRange, Position

__all__ = [
    "COMPACTED",
    "KafkaIOError",
    "RetentionError",
    "TopicSpec",
    "append",
    "check_retention",
    "ensure_topics",
    "partition_counts",
    "read_log",
    "watermarks",
]

#: Topic configs of a coordination log (control log, topic registry): compacted, and never
#: deleting a record for its age or the topic's size (said explicitly, not left to defaults).
COMPACTED = {
    "cleanup.policy": "compact",
    "retention.ms": "-1",
    "retention.bytes": "-1",
    "min.insync.replicas": "1",
}
_TIMEOUT = 30.0


class KafkaIOError(SplitstateError):
    """Kafka could not be reached or refused a request."""


class RetentionError(SplitstateError):
    """A coordination topic's config would let Kafka delete records."""


@dataclass(frozen=True)
class TopicSpec:
    """A topic to create when missing."""

    name: str
    partitions: int
    replication_factor: int = 1
    config: Mapping[str, str] | None = None


def partition_counts(admin: AdminClient, topics: Iterable[str]) -> dict[str, int]:
    """Current partition count of each existing topic among ``topics``."""
    wanted = set(topics)
    try:
        metadata = admin.list_topics(timeout=_TIMEOUT)
    except KafkaException as error:
        raise KafkaIOError(
            f"could not read Kafka metadata: {error}. Fix: check kafka.bootstrap_servers and "
            "that the broker runs (`splitstate broker status`)."
        ) from None
    return {
        name: len(topic.partitions)
        for name, topic in metadata.topics.items()
        if name in wanted and topic.error is None
    }


def ensure_topics(admin: AdminClient, specs: Sequence[TopicSpec]) -> list[str]:
    """Create the topics of ``specs`` that do not exist; returns the names created."""
    existing = partition_counts(admin, [spec.name for spec in specs])
    missing = [spec for spec in specs if spec.name not in existing]
    if not missing:
        return []
    futures = admin.create_topics(
        [
            NewTopic(
                spec.name,
                num_partitions=spec.partitions,
                replication_factor=spec.replication_factor,
                config=dict(spec.config or {}),
            )
            for spec in missing
        ]
    )
    created = []
    for name, future in futures.items():
        try:
            future.result(timeout=_TIMEOUT)
            created.append(name)
        except KafkaException as error:
            if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise KafkaIOError(f"could not create topic {name!r}: {error}") from None
    _wait_for_metadata(admin, created)
    return created


def _wait_for_metadata(admin: AdminClient, topics: Sequence[str]) -> None:
    deadline = time.monotonic() + _TIMEOUT
    while topics and time.monotonic() < deadline:
        if set(partition_counts(admin, topics)) == set(topics):
            return
        time.sleep(0.1)


def check_retention(admin: AdminClient, topics: Sequence[str]) -> None:
    """Raise ``RetentionError`` when a topic's config would delete records.

    A topic deletes records when its ``cleanup.policy`` includes ``delete`` and its
    ``retention.ms`` or ``retention.bytes`` is finite. Topics that do not exist are skipped
    (they hold nothing to lose).
    """
    resources = [ConfigResource(ResourceType.TOPIC, topic) for topic in topics]
    if not resources:
        return
    try:
        futures = admin.describe_configs(resources)
    except KafkaException as error:
        raise KafkaIOError(f"could not read the configs of {list(topics)}: {error}") from None
    for resource, future in futures.items():
        topic = resource.name
        try:
            configs = future.result(timeout=_TIMEOUT)
        except KafkaException as error:
            if error.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue
            raise KafkaIOError(
                f"could not read the config of {topic!r}: {error}. Fix: make Kafka reachable."
            ) from None
        policy = configs["cleanup.policy"].value or ""
        if "delete" not in [part.strip() for part in policy.split(",")]:
            continue
        finite = {
            setting: configs[setting].value
            for setting in ("retention.ms", "retention.bytes")
            if int(configs[setting].value or -1) >= 0
        }
        if finite:
            found = " and ".join(f"{setting}={value}" for setting, value in finite.items())
            fix = ",".join(f"{setting}=-1" for setting in finite)
            raise RetentionError(
                f"topic {topic!r} would delete records: cleanup.policy={policy} with {found}. "
                "It holds splitstate's coordination records, and a lost record changes what "
                "every processor computes. Fix: `kafka-configs.sh --bootstrap-server HOST:PORT "
                f"--alter --entity-type topics --entity-name {topic} --add-config {fix}` (or "
                "set cleanup.policy=compact)."
            )


def read_log(
    client: Mapping[str, Any], topic: str, partition: int = 0
) -> list[tuple[bytes | None, bytes | None]]:
    """Every record of ``topic``/``partition`` from the start to the current end, in order.

    A topic that does not exist yet reads as empty.
    """
    consumer = Consumer(
        {
            **client,
            "group.id": f"splitstate-reader-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        low, high = consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=_TIMEOUT
        )
        if high <= low:
            return []
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        records: list[tuple[bytes | None, bytes | None]] = []
        deadline = time.monotonic() + _TIMEOUT
        while time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        return records
                    raise KafkaIOError(f"reading {topic!r}: {error}")
                records.append((message.key(), message.value()))
                offset = message.offset()
                if offset is not None and offset + 1 >= high:
                    return records
        raise KafkaIOError(f"reading {topic!r} to its end took over {_TIMEOUT:.0f}s")
    except KafkaException as error:
        code = error.args[0].code()
        if code in (KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART):
            return []
        raise KafkaIOError(f"could not read {topic!r}: {error}") from None
    finally:
        consumer.close()


def append(producer: Producer, topic: str, records: Sequence[tuple[bytes, bytes]]) -> None:
    """Produce ``records`` to partition 0 of ``topic`` and wait until all are written."""
    failures: list[str] = []

    def delivered(error: KafkaError | None, _message: object) -> None:
        if error is not None:
            failures.append(str(error))

    for key, value in records:
        producer.produce(topic, key=key, value=value, partition=0, on_delivery=delivered)
    remaining = producer.flush(_TIMEOUT)
    if remaining or failures:
        raise KafkaIOError(
            f"could not write to {topic!r}: {failures[:3] or f'{remaining} records unsent'}"
        )


def watermarks(
    client: Mapping[str, Any], positions: Iterable[Position]
) -> dict[Position, OffsetRange]:
    """``[earliest retained, end)`` of each partition, as Kafka reports them now."""
    consumer = Consumer({**client, "group.id": "splitstate-history", "enable.auto.commit": False})
    try:
        result: dict[Position, OffsetRange] = {}
        for topic, partition in sorted(positions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
            result[(topic, partition)] = OffsetRange(low, high)
        return result
    finally:
        consumer.close()
