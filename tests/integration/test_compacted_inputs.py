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
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

import pytest
from confluent_kafka import Producer

from framework.clock import SYSTEM_CLOCK
from framework.coordination.registry import TopicEntry, TopicRegistry
from framework.growth.compaction import COMPACTION_HEADER
from framework.growth.lease import RegistryLease
from framework.growth.placement import COUNT_HEADER
from framework.kafka import Clients
from framework.producer import SplitstateProducer
from framework.records import EncodedOutput
from framework.runtime.delivery import BatchWriter
from rebalance import TopicHistory, bucket, key_hash
from tests.integration.compacted_reads import (
    keys_moving,
    read_topic,
)
from tests.integration.harness import unique

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("outcome", ["commit", "abort"])
def test_read_topic_waits_for_a_transaction_in_the_log_to_be_decided(
    kafka_bootstrap: str, topic_factory: Any, outcome: str
) -> None:
    """``read_topic`` returns a transaction the log held when it was called once it is
    committed (none of it once aborted). Kafka writes the commit markers after
    ``commit_transaction`` returns; until then the partitions look to a reader as if the
    transaction were still open: their last stable offset stands before it. ``read_topic``
    took that offset as the end and returned nothing of the transaction (seen on CI). Here
    the transaction is still open when ``read_topic`` is called and decided while it reads."""
    topic = topic_factory(4)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": unique("tx")})
    producer.init_transactions(30)
    producer.begin_transaction()
    for p in range(4):
        producer.produce(topic, value=b"v", partition=p)
    assert producer.flush(30) == 0  # in the log, its transaction open
    with ThreadPoolExecutor(1) as pool:
        reading = pool.submit(read_topic, kafka_bootstrap, topic, 4)
        wait([reading], timeout=2)  # time for read_topic to look up the ends before the commit
        if outcome == "commit":
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
        started = time.monotonic()
        records = reading.result(timeout=90)
    assert time.monotonic() - started < 30  # it saw the decision, not its deadline
    expected = [0, 1, 2, 3] if outcome == "commit" else []
    assert sorted(r.partition for r in records) == expected, records


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


@pytest.mark.parametrize("outcome", ["commit", "abort"])
def test_outputs_tombstone_in_their_transaction(
    kafka_bootstrap: str, grown_compacted: str, outcome: str
) -> None:
    """A processor's outputs to a compacted topic that grew (another app's input) write their
    compaction tombstones in the batch's transaction: both become visible, or neither."""
    topic = grown_compacted
    moved = keys_moving(4, [4, 8], 5)
    kafka = Clients({"bootstrap.servers": kafka_bootstrap})
    lease = RegistryLease(TopicRegistry(kafka), {topic: TopicRegistry(kafka).read()[topic]})
    producer = kafka.transactional_producer(unique("tx"))
    writer = BatchWriter(
        producer, lease, unique("dead"), lambda: False, SYSTEM_CLOCK, transactional=True
    )
    try:
        producer.begin()
        outputs = [
            EncodedOutput(topic, key, b"v", None, (topic, 0, i)) for i, key in enumerate(moved)
        ]
        assert writer.write(outputs, [], lambda _where: None) == []
        if outcome == "commit":
            producer.commit(30)
        else:
            producer.abort(30)
    finally:
        lease.close()
        producer.close()
        kafka.close()
    records = read_topic(kafka_bootstrap, topic, 8)
    tombstones = sorted(r.key or b"" for r in records if COMPACTION_HEADER in r.headers)
    values = sorted(r.key or b"" for r in records if COMPACTION_HEADER not in r.headers)
    if outcome == "commit":
        assert tombstones == values == sorted(moved)
    else:
        assert tombstones == values == []
