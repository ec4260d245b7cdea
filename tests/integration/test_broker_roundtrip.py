"""The real broker does what splitstate relies on: keyed produce, group consume, growth."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from tests.conftest import ConsumerFactory, ProducerFactory, TopicFactory

pytestmark = pytest.mark.integration

RECORDS = 10_000
KEYS = 500


def test_produce_consume_commit_and_grow(
    kafka_admin: AdminClient,
    topic_factory: TopicFactory,
    producer_factory: ProducerFactory,
    consumer_factory: ConsumerFactory,
) -> None:
    topic = topic_factory(partitions=6)
    producer = producer_factory({"linger.ms": 5, "enable.idempotence": True})
    for i in range(RECORDS):
        producer.produce(topic, key=f"key-{i % KEYS}".encode(), value=str(i).encode())
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0

    consumer = consumer_factory()
    consumer.subscribe([topic])
    seen: dict[str, list[int]] = {}
    partitions_of_key: dict[str, set[int]] = {}
    deadline = time.monotonic() + 60
    count = 0
    while count < RECORDS and time.monotonic() < deadline:
        for message in consumer.consume(num_messages=1000, timeout=1.0):
            assert message.error() is None, message.error()
            raw_key, value, partition = message.key(), message.value(), message.partition()
            assert raw_key is not None and value is not None and partition is not None
            key = raw_key.decode()
            seen.setdefault(key, []).append(int(value))
            partitions_of_key.setdefault(key, set()).add(partition)
            count += 1
    assert count == RECORDS
    assert len(seen) == KEYS
    # Each key lives in one partition, so its records arrive in the order produced.
    assert all(len(parts) == 1 for parts in partitions_of_key.values())
    assert all(values == sorted(values) for values in seen.values())

    consumer.commit(asynchronous=False)
    committed = consumer.committed([TopicPartition(topic, p) for p in range(6)], timeout=10)
    total = 0
    for tp in committed:
        low, high = consumer.get_watermark_offsets(tp, timeout=10)
        assert tp.offset == high
        total += high - low
    assert total == RECORDS

    kafka_admin.create_partitions([NewPartitions(topic, 9)])[topic].result(timeout=30)
    deadline = time.monotonic() + 30
    partitions = 0
    while partitions != 9 and time.monotonic() < deadline:
        partitions = len(kafka_admin.list_topics(topic, timeout=10).topics[topic].partitions)
    assert partitions == 9
