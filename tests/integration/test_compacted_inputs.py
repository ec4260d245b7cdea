"""Compacted inputs across partition-count changes, on the real broker with its log cleaner
(issue 34, part 2; the seed's section 9).

A compacted input (``cleanup.policy=compact``) keeps the last value per key. After a growth a
key's new records go to a child partition; its old value would stay in the parent forever, and
a rebuild from the log would bring back a key deleted since. The registry records whether a
topic is compacted when it is first registered; splitstate's producers then also write a
compaction tombstone (no value, header ``splitstate.compaction``) of the key to each earlier
partition, and every path that builds state skips those tombstones.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from framework.coordination.registry import TopicEntry, TopicRegistry
from framework.growth.compaction import COMPACTION_HEADER
from framework.growth.placement import COUNT_HEADER
from framework.kafka import Clients
from framework.producer import SplitstateProducer
from rebalance import TopicHistory, bucket, key_hash
from tests.integration.harness import unique

pytestmark = pytest.mark.integration

#: a compacted topic whose log cleaner runs soon after each write
FAST_COMPACTION = {
    "cleanup.policy": "compact",
    "segment.ms": "100",
    "min.cleanable.dirty.ratio": "0.01",
    "min.compaction.lag.ms": "0",
    "delete.retention.ms": "500",
}


class Read:
    """One record as read back: where it is, its key, value and headers."""

    def __init__(self, message: Any) -> None:
        self.partition: int = message.partition()
        self.offset: int = message.offset()
        self.key: bytes | None = message.key()
        self.value: bytes | None = message.value()
        self.headers: dict[str, bytes] = {
            name: value for name, value in message.headers() or [] if isinstance(value, bytes)
        }

    def __repr__(self) -> str:
        return f"[{self.partition}]@{self.offset} {self.key!r}={self.value!r} {self.headers}"


def read_topic(bootstrap: str, topic: str, partitions: int) -> list[Read]:
    """Every record of ``topic`` now (read_committed), in offset order per partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("read"),
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        ends: dict[int, int] = {}
        for p in range(partitions):
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            ends[p] = high
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        found: list[Read] = []
        reached = {p: 0 for p in ends}
        deadline = time.monotonic() + 60
        while any(reached[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            for message in consumer.consume(5000, 0.5):
                if message.error() is None:
                    found.append(Read(message))
            for p in ends:
                position = consumer.position([TopicPartition(topic, p)])[0].offset
                reached[p] = max(reached[p], position if position >= 0 else 0)
        return found
    finally:
        consumer.close()


@pytest.mark.parametrize(
    ("policy", "compacted"), [("compact", True), ("compact,delete", True), ("delete", False)]
)
def test_registration_records_whether_the_topic_is_compacted(
    kafka_bootstrap: str, topic_factory: Any, policy: str, compacted: bool
) -> None:
    topic = topic_factory(2, config={"cleanup.policy": policy})
    producer = SplitstateProducer({"bootstrap.servers": kafka_bootstrap}, [topic])
    producer.close()
    kafka = Clients({"bootstrap.servers": kafka_bootstrap})
    try:
        assert TopicRegistry(kafka).read()[topic].compacted is compacted
    finally:
        kafka.close()


def keys_moving(initial: int, counts: list[int], how_many: int) -> list[bytes]:
    """Keys whose partition differs between the first and the last of ``counts``."""
    found = []
    for i in range(100_000):
        key = f"user-{i}".encode()
        h = key_hash(key)
        if bucket(h, initial, counts[0]) != bucket(h, initial, counts[-1]):
            found.append(key)
            if len(found) == how_many:
                return found
    raise AssertionError("not enough keys")


@pytest.fixture
def grown_compacted(kafka_bootstrap: str, topic_factory: Any) -> Iterator[str]:
    """A compacted topic of 8 partitions that the registry records as grown from 4."""
    topic = topic_factory(8, config={"cleanup.policy": "compact"})
    kafka = Clients({"bootstrap.servers": kafka_bootstrap})
    try:
        registry = TopicRegistry(kafka)
        registry.ensure_topic()
        history = TopicHistory.of(topic, [4, 8], dict.fromkeys(range(4, 8), 0))
        registry.write(TopicEntry(history, compacted=True))
    finally:
        kafka.close()
    yield topic


def test_a_producer_tombstones_a_moved_keys_earlier_partition_once(
    kafka_bootstrap: str, grown_compacted: str
) -> None:
    topic = grown_compacted
    moved = keys_moving(4, [4, 8], 20)
    stayed = [k for k in (f"stay-{i}".encode() for i in range(200)) if key_hash(k) % 8 < 4][:20]
    producer = SplitstateProducer({"bootstrap.servers": kafka_bootstrap}, [topic])
    failed: list[object] = []
    try:
        for round_ in range(3):
            for key in [*moved, *stayed]:
                producer.produce(
                    topic,
                    key,
                    f"v{round_}".encode(),
                    on_delivery=lambda e, _m: failed.append(e) if e is not None else None,
                )
        assert producer.flush(30) == 0
    finally:
        producer.close()
    assert failed == []
    records = read_topic(kafka_bootstrap, topic, 8)
    tombstones = [r for r in records if COMPACTION_HEADER in r.headers]
    assert sorted(r.key for r in tombstones if r.key is not None) == sorted(moved)
    for record in tombstones:
        assert record.key is not None and record.value is None
        h = key_hash(record.key)
        assert record.partition == bucket(h, 4, 4) != bucket(h, 4, 8)
        assert record.headers[COMPACTION_HEADER] == f"{topic}/1".encode()
        assert record.headers[COUNT_HEADER] == b"8"
    values = [r for r in records if COMPACTION_HEADER not in r.headers]
    assert len(values) == 3 * (len(moved) + len(stayed))
    assert all(r.partition == bucket(key_hash(r.key or b""), 4, 8) for r in values)


def test_without_a_cache_every_record_of_a_moved_key_tombstones(
    kafka_bootstrap: str, grown_compacted: str
) -> None:
    topic = grown_compacted
    (key,) = keys_moving(4, [4, 8], 1)
    producer = SplitstateProducer(
        {"bootstrap.servers": kafka_bootstrap}, [topic], compaction_tombstones_cached=0
    )
    try:
        for value in (b"a", b"b", b"c"):
            producer.produce(topic, key, value)
    finally:
        producer.close()
    records = read_topic(kafka_bootstrap, topic, 8)
    assert len([r for r in records if COMPACTION_HEADER in r.headers]) == 3


def test_a_topic_not_compacted_gets_none(kafka_bootstrap: str, topic_factory: Any) -> None:
    topic = topic_factory(8)
    kafka = Clients({"bootstrap.servers": kafka_bootstrap})
    try:
        registry = TopicRegistry(kafka)
        registry.ensure_topic()
        registry.write(TopicEntry(TopicHistory.of(topic, [4, 8], dict.fromkeys(range(4, 8), 0))))
    finally:
        kafka.close()
    producer = SplitstateProducer({"bootstrap.servers": kafka_bootstrap}, [topic])
    try:
        for key in keys_moving(4, [4, 8], 10):
            producer.produce(topic, key, b"v")
    finally:
        producer.close()
    assert [r for r in read_topic(kafka_bootstrap, topic, 8) if r.value is None] == []
