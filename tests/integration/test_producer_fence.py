"""The growth fence against the real broker: a SplitstateProducer that waits for room in its
local queue places its key with the counts (and under the lease) as they are after the wait;
processors dead-letter records not where their count header places them, and count (for
`splitstate status`) records without the header."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from pydantic import BaseModel

from framework.coordination.registry import TopicEntry, TopicRegistry
from framework.growth.lease import ProducerLeaseError, RegistryLease
from framework.growth.placement import COUNT_HEADER, LinearHashPartitioner
from framework.kafka import Clients
from framework.producer import SplitstateProducer
from rebalance import TopicHistory, bucket, key_hash
from tests.clocks import ManualClock
from tests.integration.harness import (
    Supervised,
    TopicReader,
    create_app,
    produce,
    splitstate,
    unique,
)

pytestmark = pytest.mark.integration

WORDCOUNT = "examples.wordcount.app:app"
#: a local queue of one record: the second produce waits until the first is delivered
TINY_QUEUE = {"queue.buffering.max.messages": 1}


class Click(BaseModel):
    """A value type of a user's app."""

    user: str


def _read_all(bootstrap: str, topic: str, partitions: int) -> list[Message]:
    """Every record of ``topic`` (up to its current end), with its partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("fence-reader")})
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in range(partitions)
        }
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends if ends[p]])
        records: list[Message] = []
        while sum(ends.values()) > len(records):
            for message in consumer.consume(num_messages=100, timeout=1.0):
                assert message.error() is None, message.error()
                records.append(message)
        return records
    finally:
        consumer.close()


def _key_moved_by(initial: int, count: int) -> bytes:
    """A key whose partition differs between ``initial`` and ``count`` partitions."""
    for i in range(1000):
        key = f"k{i}".encode()
        if bucket(key_hash(key), initial, initial) != bucket(key_hash(key), initial, count):
            return key
    raise AssertionError("no moving key")


def _moving_key() -> bytes:
    """A key whose partition differs between 2 and 4 partitions (N = 2)."""
    return _key_moved_by(2, 4)


def _producer(bootstrap: str, admin: AdminClient, topic: str) -> SplitstateProducer:
    registry = TopicRegistry(Clients({"bootstrap.servers": bootstrap}))
    registry.ensure_topic()  # the first test of a fresh broker makes it
    registry.register(topic, 2)  # N = M = 2
    return SplitstateProducer({"bootstrap.servers": bootstrap}, [topic], TINY_QUEUE)


def _on_first_delivery(action: Callable[[], None], calls: list[str]) -> Callable[..., None]:
    def delivered(error: KafkaError | None, _message: Message) -> None:
        assert error is None
        calls.append("first delivered")
        action()

    return delivered


def test_a_produce_waiting_for_room_places_with_the_counts_after_the_wait(
    kafka_bootstrap: str, kafka_admin: AdminClient, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory(partitions=4)
    producer = _producer(kafka_bootstrap, kafka_admin, topic)
    key = _moving_key()
    grown = LinearHashPartitioner({topic: TopicEntry(TopicHistory.of(topic, [2, 4]))})
    calls: list[str] = []

    def renew_to_four() -> None:  # what the lease's thread does once the registry says 4
        producer.lease.partitioner = grown

    try:
        producer.produce(
            topic, b"first", b"1", on_delivery=_on_first_delivery(renew_to_four, calls)
        )
        producer.produce(topic, key, b"2")  # waits for the first record: the count changes
        assert calls == ["first delivered"], "the second produce did not wait for room"
        assert producer.flush(30) == 0
    finally:
        producer.close()
    records = _read_all(kafka_bootstrap, topic, 4)
    (second,) = [r for r in records if r.key() == key]
    assert second.partition() == bucket(key_hash(key), 2, 4)
    assert dict(second.headers() or [])[COUNT_HEADER] == b"4"


def test_a_produce_whose_lease_ran_out_while_it_waited_for_room_is_refused(
    kafka_bootstrap: str, kafka_admin: AdminClient, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory(partitions=4)
    producer = _producer(kafka_bootstrap, kafka_admin, topic)
    clock = ManualClock(may_sleep=False)
    entry = TopicEntry(TopicHistory.of(topic, [2]))
    producer.lease.close()
    producer.lease = RegistryLease(TopicRegistry(Clients({})), {topic: entry}, clock)
    calls: list[str] = []

    def lease_runs_out() -> None:  # the registry could not be read for a whole lease
        clock.now += 60.0

    try:
        producer.produce(
            topic, b"first", b"1", on_delivery=_on_first_delivery(lease_runs_out, calls)
        )
        with pytest.raises(ProducerLeaseError, match="could not re-read"):
            producer.produce(topic, _moving_key(), b"2")
        assert calls == ["first delivered"]
        assert producer.flush(30) == 0
    finally:
        producer.close()
    records = _read_all(kafka_bootstrap, topic, 4)
    assert [r.key() for r in records] == [b"first"]


def test_processors_dead_letter_misplaced_records_and_count_unfenced_ones(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    words, counts, dead = unique("words"), unique("counts"), unique("dead")
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        WORDCOUNT,
        app_id=unique("fence"),
        inputs=[{"topic": words, "partitions": 4}],
        outputs=[{"topic": counts, "partitions": 4}],
        initial_processors=2,
        dead_letter_topic=dead,
    )
    misplaced = _key_moved_by(4, 8)  # placed with 8 partitions, written where 4 put it
    right, wrong = bucket(key_hash(misplaced), 4, 8), bucket(key_hash(misplaced), 4, 4)
    produce(kafka_bootstrap, words, [(b"apple", b"")])  # through the fence
    plain = Producer({"bootstrap.servers": kafka_bootstrap})
    plain.produce(words, b"", misplaced, partition=wrong, headers=[(COUNT_HEADER, b"8")])
    pear = bucket(key_hash(b"pear"), 4, 4)
    plain.produce(words, b"", b"pear", partition=pear)  # right place, but no count header
    assert plain.flush(30) == 0
    runner = Supervised(WORDCOUNT, config, tmp_path / "state", tmp_path / "run.log")
    outputs = TopicReader(kafka_bootstrap, counts, 4)
    letters = TopicReader(kafka_bootstrap, dead, 1)
    try:
        outputs.wait_for(lambda r: len(r.records) >= 2, timeout=120, what="two counts")
        letters.wait_for(lambda r: len(r.records) >= 1, timeout=60, what="the dead letter")
    finally:
        assert runner.stop() == 0, runner.output()[-2000:]
        outputs.close()
        letters.close()
    assert sorted(key or b"" for key, _, _ in outputs.records) == [b"apple", b"pear"]
    ((key, _value, headers),) = letters.records
    fields = dict(headers)
    assert key == misplaced
    assert fields["splitstate.stage"] == b"placement"
    reason = fields["splitstate.error"].decode()
    assert reason.startswith("misplaced") and f"{words}[{right}]" in reason, reason
    assert fields["splitstate.partition"] == str(wrong).encode()
    status = splitstate("status", WORDCOUNT, "--config", str(config))
    assert status.returncode == 0, status.stderr
    assert (
        f"1 record without a splitstate.count header (written by producers that bypass the "
        f"growth fence): {words}[{pear}] 1" in status.stdout
    ), status.stdout


def test_produce_encodes_values_as_outputs_are_and_refuses_what_it_cannot(
    kafka_bootstrap: str, kafka_admin: AdminClient, topic_factory: Callable[..., str]
) -> None:
    """A dict or a pydantic model goes out as JSON, text as UTF-8, bytes as they are; an
    object that is none of these is refused before anything is queued."""

    topic = topic_factory(partitions=2)
    producer = _producer(kafka_bootstrap, kafka_admin, topic)
    try:
        for value in [{"user": "u1"}, Click(user="u2"), "text", b"raw"]:
            producer.produce(topic, b"k", value)
        with pytest.raises(TypeError, match=r"produce to '.*': a value of type object"):
            producer.produce(topic, b"k", object())
        assert producer.flush(30) == 0
    finally:
        producer.close()
    values = sorted(m.value() or b"" for m in _read_all(kafka_bootstrap, topic, 2))
    assert values == sorted([b'{"user":"u1"}', b'{"user":"u2"}', b"text", b"raw"])
