"""What the Kafka port promises, checked against ``Clients`` and the real broker.

These are the port's contract: another implementation (an in-memory Kafka) must pass them
too.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from framework.kafka import (
    COMPACTED,
    Clients,
    DeliveryError,
    Kafka,
    KafkaConsumer,
    KafkaIOError,
    LogRecord,
    Message,
    ProducerFencedError,
    RecordTooLargeError,
    TopicSpec,
    UnknownPartitionError,
    check_retention,
)
from rebalance.positions import OffsetRange
from tests.conftest import TopicFactory
from tests.integration.harness import unique

pytestmark = pytest.mark.integration


@pytest.fixture
def kafka(kafka_bootstrap: str) -> Iterator[Kafka]:
    clients = Clients({"bootstrap.servers": kafka_bootstrap})
    yield clients
    clients.close()


def test_a_log_reads_back_what_was_appended_in_order(
    kafka: Kafka, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(1, config=COMPACTED)
    assert kafka.read_log(topic) == []
    assert kafka.append(topic, [(b"a", b"1"), (b"b", b"2")]) == 2  # the offset after them
    assert kafka.append(topic, [(b"a", b"3")]) == 3  # the same producer serves every append
    assert kafka.read_log(topic) == [
        LogRecord(0, b"a", b"1"),
        LogRecord(1, b"b", b"2"),
        LogRecord(2, b"a", b"3"),
    ]


def test_a_missing_topic_reads_as_empty_and_has_no_watermarks(kafka: Kafka) -> None:
    missing = unique("missing")
    assert kafka.read_log(missing) == []
    assert kafka.partition_counts([missing]) == {}
    assert kafka.topic_configs([missing]) == {}
    with kafka.consumer(unique("group")) as consumer, pytest.raises(UnknownPartitionError):
        consumer.watermarks([(missing, 0)])


def test_topics_are_created_once_and_described(kafka: Kafka) -> None:
    name = unique("created")
    specs = [TopicSpec(name, 3, config=COMPACTED)]
    assert kafka.create_topics(specs) == [name]
    assert kafka.create_topics(specs) == []
    assert kafka.partition_counts([name]) == {name: 3}
    kafka.create_partitions(name, 5)
    assert kafka.describe_topics([name])[name].partitions == 5
    assert kafka.topic_configs([name])[name]["cleanup.policy"] == "compact"
    check_retention(kafka, [name])  # compacted, nothing deleted: accepted


def test_a_consumer_reads_assigned_partitions_and_commits_offsets(
    kafka: Kafka, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(2)
    producer = kafka.producer(linger_ms=5)
    reports: list[tuple[DeliveryError | None, int | None]] = []

    def delivered(error: DeliveryError | None, message: Message) -> None:
        reports.append((error, message.offset()))

    for i in range(5):
        producer.produce(topic, f"v{i}".encode(), b"k", 1, on_delivery=delivered)
    assert producer.flush(30) == 0
    assert reports == [(None, i) for i in range(5)]
    assert producer.partition_count(topic) == 2

    group = unique("group")
    with kafka.consumer(group, reset="earliest") as consumer:
        assert consumer.watermarks([(topic, 1), (topic, 0)]) == {
            (topic, 1): OffsetRange(0, 5),
            (topic, 0): OffsetRange(0, 0),
        }
        assert consumer.committed([(topic, 0), (topic, 1)]) == {}
        consumer.assign({(topic, 1): 2, (topic, 0): None})
        values: list[bytes | None] = []
        while len(values) < 3:
            values += [m.value() for m in consumer.consume(10, 1.0)]
        assert values == [b"v2", b"v3", b"v4"]
        assert consumer.position((topic, 1)) == 5
        # what the fetches saw, with no broker call (the metrics' lag)
        assert consumer.fetched_ends([(topic, 1)]) == {(topic, 1): 5}
        consumer.commit({(topic, 1): 5})
        consumer.seek((topic, 1), 4)
        consumer.remove([(topic, 0)])
        assert [m.offset() for m in consumer.consume(10, 5.0)] == [4]
    with kafka.consumer(group) as other:
        assert other.committed([(topic, 0), (topic, 1)]) == {(topic, 1): 5}


def test_a_record_larger_than_the_producer_takes_is_refused_with_our_error(
    kafka: Kafka, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(1)
    producer = kafka.producer(settings={"message.max.bytes": 2000})
    with pytest.raises(RecordTooLargeError) as refused:
        producer.produce(topic, b"x" * 5000, b"k", 0)
    assert refused.value.reason


def test_a_missing_partition_of_a_topic_reads_as_empty(
    kafka: Kafka, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(1)
    kafka.append(topic, [(b"a", b"1")])
    assert kafka.read_log(topic, 3) == []
    assert kafka.read_log(topic) == [LogRecord(0, b"a", b"1")]


def test_a_producer_refuses_a_partition_its_metadata_lacks(
    kafka: Kafka, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(2)
    producer = kafka.producer()
    producer.produce(topic, b"v", b"k", 1)
    assert producer.flush(30) == 0  # the producer holds the topic's metadata now
    with pytest.raises(UnknownPartitionError):
        producer.produce(topic, b"v", b"k", 2)
    kafka.create_partitions(topic, 3)
    while producer.partition_count(topic) < 3:  # refreshes the producer's metadata
        kafka.clock.sleep(0.1)
    reports: list[tuple[DeliveryError | None, int | None]] = []

    def delivered(error: DeliveryError | None, message: Message) -> None:
        reports.append((error, message.offset()))

    producer.produce(topic, b"v", b"k", 2, on_delivery=delivered)
    assert producer.flush(30) == 0
    assert reports == [(None, 0)]


def test_poll_with_nothing_to_serve_waits_its_timeout(kafka: Kafka) -> None:
    producer = kafka.producer()
    before = kafka.clock.monotonic()
    assert producer.poll(0.3) == 0
    assert kafka.clock.monotonic() - before >= 0.25


def test_a_consumer_adds_only_unassigned_partitions_and_removes_only_assigned_ones(
    kafka: Kafka, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(2)
    with kafka.consumer(unique("group")) as consumer:
        consumer.assign({(topic, 0): None})
        with pytest.raises(KafkaIOError, match="already"):
            consumer.add({(topic, 0): 3})
        with pytest.raises(KafkaIOError, match="not in the current assignment"):
            consumer.remove([(topic, 1)])
        consumer.add({(topic, 1): None})
        consumer.remove([(topic, 0)])


def test_a_position_is_known_once_a_record_was_consumed_there(
    kafka: Kafka, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(1)
    kafka.append(topic, [(b"k", str(i).encode()) for i in range(5)])
    position = (topic, 0)
    with kafka.consumer(unique("group")) as consumer:
        consumer.assign({position: 2})
        assert consumer.position(position) is None
        offsets: list[int | None] = []
        while len(offsets) < 3:
            offsets += [m.offset() for m in consumer.consume(10, 1.0)]
        assert offsets == [2, 3, 4]
        assert consumer.position(position) == 5
        consumer.seek(position, 1)
        assert consumer.position(position) is None


def test_a_producer_takes_records_up_to_about_a_million_bytes_by_default(
    kafka: Kafka, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(1)
    producer = kafka.producer()
    with pytest.raises(RecordTooLargeError):  # librdkafka's message.max.bytes: 1,000,000
        producer.produce(topic, b"x" * 1_000_000, b"k", 0)
    reports: list[DeliveryError | None] = []
    producer.produce(topic, b"x" * 999_000, b"k", 0, on_delivery=lambda e, _m: reports.append(e))
    assert producer.flush(30) == 0
    assert reports == [None]


def test_an_append_of_a_record_larger_than_kafka_takes_fails(
    kafka: Kafka, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(1, config={"max.message.bytes": "20000"})
    with pytest.raises(KafkaIOError):  # over the producer's message.max.bytes
        kafka.append(topic, [(b"k", b"x" * 1_000_000)])
    with pytest.raises(KafkaIOError):  # over the topic's max.message.bytes
        kafka.append(topic, [(b"k", b"x" * 50_000)])
    kafka.append(topic, [(b"k", b"small")])  # a later append works
    assert kafka.read_log(topic)[-1][1:] == (b"k", b"small")


def test_a_transaction_shows_its_records_and_offsets_together_or_not_at_all(
    kafka: Kafka, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(1)
    group, ident = unique("group"), unique("txn")
    # a delivery timeout above librdkafka's default transaction timeout (60 s) is taken
    producer = kafka.transactional_producer(ident, linger_ms=5, delivery_timeout_ms=90_000)
    with kafka.consumer(group, reset="earliest") as consumer:
        producer.begin()
        producer.produce(topic, b"aborted", b"k", 0)
        producer.flush(30)
        producer.send_offsets({(topic, 0): 7}, consumer)
        producer.abort(30)
        producer.begin()
        producer.produce(topic, b"committed", b"k", 0)
        producer.send_offsets({(topic, 0): 9}, consumer)
        producer.commit(30)
        assert consumer.committed([(topic, 0)]) == {(topic, 0): 9}
        consumer.assign({(topic, 0): None})
        seen: list[bytes | None] = []
        for _ in range(20):
            seen.extend(m.value() for m in consumer.consume(10, 0.5))
            if seen:
                break
        assert seen == [b"committed"]  # the aborted record is never read (read_committed)
    newer = kafka.transactional_producer(ident)  # fences the first
    with pytest.raises(ProducerFencedError):
        producer.begin()
        producer.produce(topic, b"zombie", b"k", 0)
        producer.flush(30)
        producer.commit(30)
    newer.begin()
    newer.produce(topic, b"newer", b"k", 0)
    newer.commit(30)


def test_transaction_markers_take_offsets_that_read_committed_readers_step_over(
    kafka: Kafka, topic_factory: TopicFactory
) -> None:
    """Kafka writes a marker (one offset) in each partition a transaction wrote to when it
    ends. A ``read_committed`` consumer never returns markers or aborted records, yet its
    position moves past them; its ``watermarks`` end at the last stable offset (the first
    offset of an open transaction), its ``fetched_ends`` at the high watermark."""
    topic = topic_factory(1)
    position = (topic, 0)
    producer = kafka.transactional_producer(unique("txn"), linger_ms=5)
    producer.begin()
    producer.produce(topic, b"aborted", b"k", 0)  # offset 0, its ABORT marker 1
    producer.flush(30)
    producer.abort(30)
    producer.begin()
    producer.produce(topic, b"committed", b"k", 0)  # offset 2, its COMMIT marker 3
    producer.commit(30)
    with kafka.consumer(unique("group"), reset="earliest") as consumer:
        assert _stable_end(consumer, position, 4) == OffsetRange(0, 4)
        consumer.assign({position: None})
        seen: list[tuple[int | None, bytes | None]] = []
        for _ in range(20):
            seen += [(m.offset(), m.value()) for m in consumer.consume(10, 0.5)]
            if consumer.position(position) == 4:
                break
        assert seen == [(2, b"committed")]
        assert consumer.position(position) == 4  # past the COMMIT marker
        producer.begin()
        producer.produce(topic, b"open", b"k", 0)  # offset 4, its transaction left open
        producer.flush(30)
        kafka.append(topic, [(b"k", b"plain")])  # offset 5, no transaction
        assert consumer.watermarks([position])[position] == OffsetRange(0, 4)
        assert consumer.consume(10, 1.0) == []  # nothing below the last stable offset
        assert consumer.fetched_ends([position]) == {position: 6}
        producer.commit(30)  # its COMMIT marker at 6
        assert _stable_end(consumer, position, 7) == OffsetRange(0, 7)
        for _ in range(20):
            seen += [(m.offset(), m.value()) for m in consumer.consume(10, 0.5)]
            if consumer.position(position) == 7:
                break
        assert seen == [(2, b"committed"), (4, b"open"), (5, b"plain")]
        assert consumer.position(position) == 7
        assert consumer.fetched_ends([position]) == {position: 7}


def _stable_end(consumer: KafkaConsumer, position: tuple[str, int], end: int) -> OffsetRange:
    """The partition's watermarks once they end at ``end`` (or after 10 s): a commit returns
    when the coordinator logged it, and the broker writes the partition's marker, moving its
    last stable offset, a moment later."""
    deadline = time.monotonic() + 10
    watermarks = consumer.watermarks([position])[position]
    while watermarks.end != end and time.monotonic() < deadline:
        time.sleep(0.05)
        watermarks = consumer.watermarks([position])[position]
    return watermarks


def test_a_new_producer_of_a_transactional_id_aborts_what_an_old_one_left_open(
    kafka: Kafka, topic_factory: TopicFactory
) -> None:
    """A process that died in a transaction leaves it open (``read_committed`` readers stop
    at its first record); the next producer of its transactional id aborts it."""
    topic = topic_factory(1)
    position = (topic, 0)
    ident = unique("txn")
    crashed = kafka.transactional_producer(ident, linger_ms=5)
    crashed.begin()
    crashed.produce(topic, b"lost", b"k", 0)  # offset 0
    crashed.flush(30)
    kafka.append(topic, [(b"k", b"after")])  # offset 1
    with kafka.consumer(unique("group"), reset="earliest") as consumer:
        assert consumer.watermarks([position])[position] == OffsetRange(0, 0)
        kafka.transactional_producer(ident)  # its ABORT marker at 2
        assert consumer.watermarks([position])[position] == OffsetRange(0, 3)
        consumer.assign({position: None})
        seen: list[bytes | None] = []
        for _ in range(20):
            seen += [m.value() for m in consumer.consume(10, 0.5)]
            if consumer.position(position) == 3:
                break
        assert seen == [b"after"]


def test_watermarks_of_a_partition_added_after_the_consumer_read_metadata(
    kafka: Kafka, topic_factory: TopicFactory
) -> None:
    """A processor asks for a grown topic's new partition (a growth just lifted its gate)
    with a consumer whose metadata predates the growth: it must refresh, not fail."""
    topic = topic_factory(1)
    kafka.append(topic, [(b"a", b"1")])
    with kafka.consumer(unique("group")) as consumer:
        assert consumer.watermarks([(topic, 0)])[(topic, 0)] == OffsetRange(0, 1)
        kafka.create_partitions(topic, 2)
        assert consumer.watermarks([(topic, 1)])[(topic, 1)] == OffsetRange(0, 0)
