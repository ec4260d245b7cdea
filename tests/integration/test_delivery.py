"""BatchWriter on the real broker: placement under the lease after a wait (issue 12, defect 9),
and the dead letters that stand in for records too large."""

from __future__ import annotations

from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from framework.clock import SYSTEM_CLOCK
from framework.coordination.registry import TopicEntry, TopicRegistry
from framework.growth.lease import RegistryLease
from framework.growth.placement import LinearHashPartitioner
from framework.kafka import Clients
from framework.kafka.confluent_producer import ConfluentProducer
from framework.processing import DeadLetter, EncodedOutput, StoredMessage
from framework.runtime.delivery import (
    MAX_DEAD_LETTER_VALUE,
    BatchWriter,
    output_dead_letter,
    stripped_dead_letter,
)
from rebalance import TopicHistory
from tests.conftest import TopicFactory
from tests.integration.harness import unique


class WaitingProducer(Producer):
    """A producer that calls ``on_wait`` the first time it is polled (a wait for room)."""

    on_wait: object = None
    polls = 0

    def poll(self, *args: float) -> int:
        self.polls += 1
        if self.polls == 1 and callable(self.on_wait):
            self.on_wait()
        return super().poll(*args)


class RenewingProducer(Producer):
    """A producer that calls ``on_first`` right after its first record is queued."""

    on_first: object = None
    produced = 0

    def produce(self, *args: Any, **kwargs: Any) -> None:
        super().produce(*args, **kwargs)
        self.produced += 1
        if self.produced == 1 and callable(self.on_first):
            self.on_first()


def read(
    bootstrap: str, topic: str, partitions: int, count: int, seconds: int = 30
) -> list[tuple[int, dict[str, bytes]]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("read")})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    found: list[tuple[int, dict[str, bytes]]] = []
    for _ in range(seconds):
        for message in consumer.consume(num_messages=100, timeout=1.0):
            if message.error() is None:
                headers: dict[str, bytes] = {}
                for header in message.headers() or []:
                    if isinstance(header[1], bytes):
                        headers[str(header[0])] = header[1]
                found.append((int(message.partition() or 0), headers))
        if len(found) >= count:
            break
    consumer.close()
    return found


def test_an_output_that_waited_for_queue_room_is_placed_by_the_lease_after_the_wait(
    kafka_bootstrap: str, kafka_admin: AdminClient, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(partitions=4)
    before = {topic: TopicEntry(TopicHistory.of(topic, [2]))}
    grown = LinearHashPartitioner({topic: TopicEntry(TopicHistory.of(topic, [2, 4]))})
    lease = RegistryLease(TopicRegistry(Clients({"bootstrap.servers": kafka_bootstrap})), before)
    old = lease.partitioner
    key, later = [
        k
        for k in (f"key-{i}".encode() for i in range(100))
        if grown.partition(topic, k) != old.partition(topic, k)
    ][:2]
    producer = WaitingProducer(
        {"bootstrap.servers": kafka_bootstrap, "queue.buffering.max.messages": 1, "linger.ms": 20}
    )

    def grow() -> None:  # the registry lease renews with a growth while the writer waits
        lease.partitioner = grown

    producer.on_wait = grow
    writer = BatchWriter(
        ConfluentProducer(producer), lease, unique("dead"), lambda: False, SYSTEM_CLOCK
    )
    outputs = [
        EncodedOutput(topic, b"first", b"1", None, (topic, 0, 0)),
        EncodedOutput(topic, key, b"2", None, (topic, 0, 1)),  # the queue is full: it waits
        EncodedOutput(topic, later, b"3", None, (topic, 0, 2)),  # placed after the renewal
    ]
    assert writer.write(outputs, [], lambda _where: None) == []
    assert producer.polls >= 1
    expected = grown.partition(topic, key)
    assert outputs[1].partition == expected
    assert outputs[2].partition == grown.partition(topic, later)
    found = read(kafka_bootstrap, topic, 4, 3)
    assert (expected, {"splitstate.count": b"4"}) in found
    assert (grown.partition(topic, later), {"splitstate.count": b"4"}) in found
    assert (old.partition(topic, b"first"), {"splitstate.count": b"2"}) in found


def test_outputs_after_a_renewal_in_the_middle_of_a_batch_use_the_new_counts(
    kafka_bootstrap: str, kafka_admin: AdminClient, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(partitions=4)
    before = {topic: TopicEntry(TopicHistory.of(topic, [2]))}
    grown = LinearHashPartitioner({topic: TopicEntry(TopicHistory.of(topic, [2, 4]))})
    lease = RegistryLease(TopicRegistry(Clients({"bootstrap.servers": kafka_bootstrap})), before)
    old = lease.partitioner
    moved = next(
        k
        for k in (f"key-{i}".encode() for i in range(100))
        if grown.partition(topic, k) != old.partition(topic, k)
    )
    producer = RenewingProducer({"bootstrap.servers": kafka_bootstrap})

    def grow() -> None:  # the lease renews with a growth between two outputs
        lease.partitioner = grown

    producer.on_first = grow
    writer = BatchWriter(
        ConfluentProducer(producer), lease, unique("dead"), lambda: False, SYSTEM_CLOCK
    )
    outputs = [
        EncodedOutput(topic, b"first", b"1", None, (topic, 0, 0)),
        EncodedOutput(topic, moved, b"2", None, (topic, 0, 1)),
    ]
    assert writer.write(outputs, [], lambda _where: None) == []
    assert outputs[1].partition == grown.partition(topic, moved)
    found = read(kafka_bootstrap, topic, 4, 2)
    assert (grown.partition(topic, moved), {"splitstate.count": b"4"}) in found


def test_a_stale_lease_holds_output_back_and_a_stop_gives_up(
    kafka_bootstrap: str, kafka_admin: AdminClient, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(partitions=2)
    entries = {topic: TopicEntry(TopicHistory.of(topic, [2]))}
    lease = RegistryLease(TopicRegistry(Clients({"bootstrap.servers": kafka_bootstrap})), entries)
    lease.lease_seconds = 0.0  # never renewed: stale at once
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    writer = BatchWriter(
        ConfluentProducer(producer), lease, unique("dead"), lambda: True, SYSTEM_CLOCK
    )
    output = EncodedOutput(topic, b"k", b"v", None, (topic, 0, 0))
    try:
        writer.write([output], [], lambda _where: None)
    except Exception as error:
        assert "lease was stale" in str(error)
    else:
        raise AssertionError("a write under a stale lease went through")
    assert len(producer) == 0  # nothing was queued
    assert read(kafka_bootstrap, topic, 2, 1, seconds=3) == []


def test_outputs_too_large_become_dead_letters_once_and_the_rest_arrives(
    kafka_bootstrap: str, kafka_admin: AdminClient, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(partitions=1, config={"max.message.bytes": "2000"})
    dead = topic_factory(partitions=1)
    entries = {topic: TopicEntry(TopicHistory.of(topic, [1]))}
    registry = TopicRegistry(Clients({"bootstrap.servers": kafka_bootstrap}))
    lease = RegistryLease(registry, entries)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True})
    writer = BatchWriter(ConfluentProducer(producer), lease, dead, lambda: False, SYSTEM_CLOCK)
    small = [EncodedOutput(topic, b"s%d" % i, b"x" * 60, None, (topic, 0, i)) for i in range(40)]
    big = EncodedOutput(topic, b"big", b"b" * 5000, None, (topic, 0, 40))  # over the topic's
    huge = EncodedOutput(topic, b"huge", b"h" * 1_100_000, None, (topic, 0, 41))  # producer's
    late = [EncodedOutput(topic, b"l%d" % i, b"y" * 60, None, (topic, 0, 42 + i)) for i in range(5)]
    messages = {
        o.origin: StoredMessage(topic, 0, o.origin[2], o.key, b"in", None, None)
        for o in [big, huge]
        if o.origin is not None
    }

    def source(where: tuple[str, int, int] | None) -> StoredMessage | None:
        return None if where is None else messages.get(where)

    letters = writer.write([*small, big, huge, *late], [], source)
    assert sorted(letter.offset for letter in letters) == [40, 41]
    assert all(letter.stage == "output" and letter.value == b"in" for letter in letters)
    delivered = read(kafka_bootstrap, topic, 1, len(small) + len(late))
    assert len(delivered) >= len(small) + len(late)  # some may repeat (resent one by one)
    assert len(read(kafka_bootstrap, dead, 1, 2, seconds=5)) == 2


def test_stand_in_dead_letters() -> None:
    message = StoredMessage(
        "in", 3, 17, b"k", b"v" * (MAX_DEAD_LETTER_VALUE + 5), None, [("h", b"x")]
    )
    output = EncodedOutput("out", b"k", b"o" * 5000, None, ("in", 3, 17))
    letter = output_dead_letter(output, "Broker: Message size too large", message)
    assert (letter.topic, letter.partition, letter.offset, letter.stage) == ("in", 3, 17, "output")
    assert letter.value == b"v" * MAX_DEAD_LETTER_VALUE and letter.headers == (("h", b"x"),)
    assert f"the first {MAX_DEAD_LETTER_VALUE} of its {MAX_DEAD_LETTER_VALUE + 5} bytes" in (
        letter.reason
    )
    assert "its output to topic 'out' (5001 bytes)" in letter.reason
    big = DeadLetter("in", 3, 17, b"K" * 5000, b"v" * 10, (("h", b"x"),), "decode", "bad")
    small = stripped_dead_letter(big, "dead", "too large")
    assert (small.key, small.value, small.headers) == (None, None, ())
    assert small.reason.startswith("bad [this dead letter was too large for topic 'dead'")
    assert "key, value and headers were dropped; read it at in[3]@17" in small.reason
