"""The in-memory Kafka keeps the port's contract: the same tests as the real broker's
(``tests/integration/test_kafka_port.py``), plus what only the simulation's adversary does."""

from __future__ import annotations

import random
import uuid

import pytest

from framework.kafka import (
    COMPACTED,
    DeliveryError,
    KafkaIOError,
    LogRecord,
    Message,
    OffsetResetError,
    TopicSpec,
    UnknownPartitionError,
)
from tests.clocks import ManualClock
from tests.conftest import TopicFactory
from tests.integration.test_kafka_port import (
    test_a_consumer_adds_only_unassigned_partitions_and_removes_only_assigned_ones,
    test_a_consumer_reads_assigned_partitions_and_commits_offsets,
    test_a_log_reads_back_what_was_appended_in_order,
    test_a_missing_partition_of_a_topic_reads_as_empty,
    test_a_missing_topic_reads_as_empty_and_has_no_watermarks,
    test_a_new_producer_of_a_transactional_id_aborts_what_an_old_one_left_open,
    test_a_position_is_known_once_a_record_was_consumed_there,
    test_a_producer_refuses_a_partition_its_metadata_lacks,
    test_a_producer_takes_records_up_to_about_a_million_bytes_by_default,
    test_a_record_larger_than_the_producer_takes_is_refused_with_our_error,
    test_a_transaction_shows_its_records_and_offsets_together_or_not_at_all,
    test_an_append_of_a_record_larger_than_kafka_takes_fails,
    test_poll_with_nothing_to_serve_waits_its_timeout,
    test_topics_are_created_once_and_described,
    test_transaction_markers_take_offsets_that_read_committed_readers_step_over,
)
from tests.sim.broker import Broker
from tests.sim.chaos import Chaos
from tests.sim.kafka import MemoryKafka, NoFaults
from tests.sim.scheduler import Scheduler

__all__ = [
    "test_a_consumer_adds_only_unassigned_partitions_and_removes_only_assigned_ones",
    "test_a_consumer_reads_assigned_partitions_and_commits_offsets",
    "test_a_log_reads_back_what_was_appended_in_order",
    "test_a_missing_partition_of_a_topic_reads_as_empty",
    "test_a_missing_topic_reads_as_empty_and_has_no_watermarks",
    "test_a_new_producer_of_a_transactional_id_aborts_what_an_old_one_left_open",
    "test_a_position_is_known_once_a_record_was_consumed_there",
    "test_a_producer_refuses_a_partition_its_metadata_lacks",
    "test_a_producer_takes_records_up_to_about_a_million_bytes_by_default",
    "test_a_record_larger_than_the_producer_takes_is_refused_with_our_error",
    "test_a_transaction_shows_its_records_and_offsets_together_or_not_at_all",
    "test_an_append_of_a_record_larger_than_kafka_takes_fails",
    "test_poll_with_nothing_to_serve_waits_its_timeout",
    "test_topics_are_created_once_and_described",
    "test_transaction_markers_take_offsets_that_read_committed_readers_step_over",
]


@pytest.fixture
def kafka() -> MemoryKafka:
    return MemoryKafka(Broker(random.Random(0)), ManualClock())


@pytest.fixture
def topic_factory(kafka: MemoryKafka) -> TopicFactory:
    def create(
        partitions: int = 1, name: str | None = None, config: dict[str, str] | None = None
    ) -> str:
        topic = name or f"test-{uuid.uuid4().hex[:10]}"
        assert kafka.create_topics([TopicSpec(topic, partitions, config=config)]) == [topic]
        return topic

    return create


def test_compaction_keeps_the_last_record_of_each_key_and_its_offset(kafka: MemoryKafka) -> None:
    kafka.create_topics([TopicSpec("log", 1, config=COMPACTED)])
    kafka.append("log", [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"c", b"1"), (b"b", b"2")])
    rng = random.Random(3)
    while len(kafka.read_log("log")) > 3:  # each pass cleans a random prefix
        kafka.broker.compact("log", rng)
    assert kafka.read_log("log") == [
        LogRecord(2, b"a", b"2"),
        LogRecord(3, b"c", b"1"),
        LogRecord(4, b"b", b"2"),
    ]
    assert kafka.broker.end_offset("log", 0) == 5


class _Whole(random.Random):
    """Draws the largest integer asked for (the cleaner's cleanable point: everything)."""

    def randint(self, a: int, b: int) -> int:
        return b


def _input_log(kafka: MemoryKafka, partitions: int = 1) -> None:
    configs = {"cleanup.policy": "compact", "delete.retention.ms": "1000"}
    kafka.create_topics([TopicSpec("in", partitions, config=configs)])


def _write(kafka: MemoryKafka, partition: int, *records: tuple[bytes, bytes | None]) -> None:
    producer = kafka.producer()
    for key, value in records:
        producer.produce("in", value, key, partition)
    producer.flush(1)


def _offsets(kafka: MemoryKafka, partition: int = 0) -> list[tuple[int, bytes | None]]:
    return [(r.offset, r.value) for r in kafka.broker.records("in", partition)]


def test_the_cleaner_keeps_each_keys_last_record_per_partition_below_a_common_point() -> None:
    clock = ManualClock()
    kafka = MemoryKafka(Broker(random.Random(0)), clock)
    _input_log(kafka, 2)
    _write(kafka, 0, (b"a", b"0"), (b"b", b"0"), (b"a", b"1"))
    _write(kafka, 1, (b"a", b"x"), (b"a", b"y"))  # (another partition: its own last records)
    _write(kafka, 0, (b"b", b"1"), (b"a", b"2"))
    moment = random.Random(0)
    moment.randint = lambda a, b: 5  # type: ignore[method-assign]  # (the first five written)
    removed = kafka.broker.clean("in", moment, 0, {})
    # partition 0 is cleanable below offset 3 (written before the moment), partition 1
    # below 1 (its active segment holds its last record); only records below that point
    # supersede others
    assert _offsets(kafka, 0) == [(1, b"0"), (2, b"1"), (3, b"1"), (4, b"2")]
    assert _offsets(kafka, 1) == [(0, b"x"), (1, b"y")]
    assert [(r.partition, r.offset) for r in removed] == [(0, 0)]
    kafka.broker.clean("in", _Whole(), 0, {})
    assert _offsets(kafka, 0) == [(2, b"1"), (3, b"1"), (4, b"2")]
    _write(kafka, 1, (b"b", b"z"))
    kafka.broker.clean("in", _Whole(), 0, {})
    assert _offsets(kafka, 1) == [(1, b"y"), (2, b"z")]
    assert kafka.broker.end_offset("in", 0) == 5  # offsets keep their gaps


def test_a_tombstone_goes_once_old_and_read_by_the_group_with_what_it_deletes() -> None:
    clock = ManualClock()
    kafka = MemoryKafka(Broker(random.Random(0)), clock)
    _input_log(kafka)
    _write(kafka, 0, (b"a", b"0"), (b"a", None), (b"b", b"0"))
    kafka.broker.clean("in", _Whole(), int(clock.time() * 1000), {0: 3})
    assert _offsets(kafka) == [(1, None), (2, b"0")]  # not delete.retention.ms old yet
    clock.sleep(1.0)
    kafka.broker.clean("in", _Whole(), int(clock.time() * 1000), {0: 1})
    assert _offsets(kafka) == [(1, None), (2, b"0")]  # the group has not read it
    kafka.broker.clean("in", _Whole(), int(clock.time() * 1000), {0: 2})
    assert _offsets(kafka) == [(2, b"0")]


def test_the_cleaner_stops_at_an_open_transaction_and_removes_aborted_records() -> None:
    clock = ManualClock()
    kafka = MemoryKafka(Broker(random.Random(0)), clock)
    _input_log(kafka)
    aborted = kafka.transactional_producer("t1")
    aborted.begin()
    aborted.produce("in", b"gone", b"a", 0)
    aborted.abort(1)
    _write(kafka, 0, (b"a", b"0"))
    still_open = kafka.transactional_producer("t2")
    still_open.begin()
    still_open.produce("in", b"open", b"b", 0)
    _write(kafka, 0, (b"a", b"1"))
    kafka.broker.clean("in", _Whole(), 0, {})
    # the aborted record goes (its marker stays); nothing at or past the open one is cleaned
    assert _offsets(kafka) == [(1, None), (2, b"0"), (3, b"open"), (4, b"1")]


def test_a_record_without_a_key_is_refused_by_a_compacted_topic(kafka: MemoryKafka) -> None:
    _input_log(kafka)
    errors: list[str] = []
    producer = kafka.producer()
    producer.produce("in", b"v", None, 0, on_delivery=lambda e, _m: errors.append(str(e)))
    producer.flush(1)
    assert errors and "Invalid record" in errors[0]
    assert not kafka.broker.records("in", 0)


def test_retention_makes_an_error_consumer_stop_and_an_earliest_one_jump(
    kafka: MemoryKafka,
) -> None:
    kafka.create_topics([TopicSpec("in", 1)])
    producer = kafka.producer()
    for i in range(4):
        producer.produce("in", str(i).encode(), b"k", 0)
    producer.flush(1)
    kafka.broker.delete_before("in", 0, 2)
    with kafka.consumer("g", reset="error") as strict, pytest.raises(OffsetResetError):
        strict.assign({("in", 0): 0})
        strict.consume(10, 0.1)
    with kafka.consumer("g", reset="earliest") as lenient:
        lenient.assign({("in", 0): 0})
        assert [m.offset() for m in lenient.consume(10, 0.1)] == [2, 3]


class _CutOff(NoFaults):
    """The process cannot reach the broker."""

    def fetch(self, wanted: int) -> int:
        return 0

    def unreachable(self, process: str) -> bool:
        return True


def test_a_record_is_written_when_queued_and_reported_at_the_next_poll(kafka: MemoryKafka) -> None:
    kafka.create_topics([TopicSpec("in", 1)])
    called: list[int | None] = []
    producer = kafka.producer()
    producer.produce("in", b"v", b"k", 0, on_delivery=lambda _e, m: called.append(m.offset()))
    assert len(kafka.broker.records("in", 0)) == 1  # sent at once, as librdkafka does
    assert not called
    assert producer.poll(0) == 1 and called == [0]


def test_a_crash_delivers_a_prefix_of_each_partitions_unsent_records_and_no_callbacks() -> None:
    # records queued while the process is cut off from the broker; it dies as the broker
    # comes back: per partition, some of them got out, in order
    kafka = MemoryKafka(Broker(random.Random(0)), ManualClock(), faults=_CutOff())
    kafka.create_topics([TopicSpec("in", 2)])
    called: list[int | None] = []

    def delivered(_error: DeliveryError | None, message: Message) -> None:
        called.append(message.offset())

    for run in range(20):
        producer = kafka.producer()
        for i in range(6):
            producer.produce("in", f"{run}:{i}".encode(), b"k", i % 2, on_delivery=delivered)
        kafka.crash(random.Random(run))
    assert not called
    for partition in (0, 1):
        by_run: dict[str, list[int]] = {}
        for record in kafka.broker.records("in", partition):
            assert record.value is not None
            label, index = record.value.decode().split(":")
            by_run.setdefault(label, []).append(int(index))
        for written in by_run.values():  # a prefix of what was queued for the partition
            assert written == list(range(partition, 6, 2))[: len(written)]
    assert 0 < sum(len(kafka.broker.records("in", p)) for p in (0, 1)) < 20 * 6


def test_an_append_that_times_out_after_landing_raises_yet_is_written() -> None:
    class LateFailure(NoFaults):
        def before(self, operation: str) -> str | None:
            return "after" if operation == "kafka.append" else None

    kafka = MemoryKafka(Broker(random.Random(0)), ManualClock(), faults=LateFailure())
    kafka.create_topics([TopicSpec("log", 1, config=COMPACTED)])
    with pytest.raises(KafkaIOError, match="landed"):
        kafka.append("log", [(b"a", b"1")])
    assert kafka.read_log("log") == [LogRecord(0, b"a", b"1")]


def test_consuming_nothing_waits_its_timeout_on_the_clock() -> None:
    clock = ManualClock()
    kafka = MemoryKafka(Broker(random.Random(0)), clock)
    kafka.create_topics([TopicSpec("in", 1)])
    with kafka.consumer("g") as consumer:
        consumer.assign({("in", 0): None})
        assert consumer.consume(10, 2.5) == []
    assert clock.now == 2.5


def test_a_producer_places_with_its_own_metadata_until_it_is_refreshed() -> None:
    clock = ManualClock()
    kafka = MemoryKafka(Broker(random.Random(0)), clock)
    kafka.create_topics([TopicSpec("in", 2)])
    producer = kafka.producer()
    producer.produce("in", b"v", b"k", 1)  # the producer reads the topic's metadata
    producer.flush(1)
    kafka.create_partitions("in", 3)
    with pytest.raises(UnknownPartitionError):  # its metadata still says 2 partitions
        producer.produce("in", b"v", b"k", 2)
    clock.now += 300  # librdkafka re-reads metadata every topic.metadata.refresh.interval.ms
    producer.produce("in", b"v", b"k", 2)
    producer.flush(1)
    assert [len(kafka.broker.records("in", p)) for p in range(3)] == [0, 1, 1]


def test_a_consumer_cut_off_from_the_broker_fetches_nothing_until_it_is_back() -> None:
    scheduler = Scheduler(random.Random(0))
    chaos = Chaos(scheduler, random.Random(1), fail_rate=0.0, slow_rate=0.0)
    kafka = MemoryKafka(Broker(random.Random(0)), scheduler.clock, name="p#1", faults=chaos)
    kafka.create_topics([TopicSpec("in", 1)])
    kafka.append("in", [(b"k", b"v")])
    fetched: list[tuple[float, int]] = []

    def reader() -> None:
        with kafka.consumer("g") as consumer:
            consumer.assign({("in", 0): 0})
            chaos.isolate(["reader"], 5.0)
            while not fetched or not fetched[-1][1]:
                count = len(consumer.consume(10, 1.0))
                fetched.append((scheduler.clock.monotonic(), count))

    scheduler.spawn("reader", reader)
    while scheduler.step() is not None:
        pass
    assert fetched[-1][1] == 1 and fetched[-1][0] >= 5.0
    assert all(count == 0 for _, count in fetched[:-1]) and len(fetched) >= 4


def test_a_fetch_to_be_cut_short_gets_a_part_then_the_topic_is_away_for_a_while() -> None:
    scheduler = Scheduler(random.Random(0))
    chaos = Chaos(scheduler, random.Random(1), fail_rate=0.0, slow_rate=0.0)
    kafka = MemoryKafka(Broker(random.Random(0)), scheduler.clock, name="p#1", faults=chaos)
    kafka.create_topics([TopicSpec("log", 1)])
    kafka.append("log", [(b"k", str(i).encode()) for i in range(5)])
    chaos.cut_next[("reader", "log")] = 8.0
    fetched: list[tuple[float, int]] = []

    def reader() -> None:
        with kafka.consumer("g") as consumer:
            consumer.assign({("log", 0): 0})
            while sum(count for _, count in fetched) < 5:
                fetched.append((scheduler.clock.monotonic(), len(consumer.consume(10, 1.0))))

    scheduler.spawn("reader", reader)
    while scheduler.step() is not None:
        pass
    first, rest = fetched[0][1], [(t, n) for t, n in fetched[1:] if n]
    assert 1 <= first < 5  # cut short
    assert rest == [(rest[0][0], 5 - first)]
    assert rest[0][0] - fetched[0][0] >= 7.0  # the rest after the wait (8 s from the cut)
    assert ("reader", "log") not in chaos.cut_next  # once


def test_a_record_queued_while_cut_off_is_sent_once_back_though_its_owner_makes_no_call() -> None:
    scheduler = Scheduler(random.Random(0))
    chaos = Chaos(scheduler, random.Random(1), fail_rate=0.0, slow_rate=0.0)
    broker = Broker(random.Random(0))
    owner = MemoryKafka(broker, scheduler.clock, name="writer#1", faults=chaos)
    other = MemoryKafka(broker, scheduler.clock, name="other#2", faults=chaos)
    owner.create_topics([TopicSpec("in", 1)])
    landed: list[float] = []

    def writer() -> None:
        producer = owner.producer(delivery_timeout_ms=10_000)
        chaos.isolate(["writer"], 3.0)
        producer.produce("in", b"v", b"k", 0)
        scheduler.clock.sleep(20.0)  # busy elsewhere: no poll, no flush

    def bystander() -> None:
        while not landed and scheduler.clock.monotonic() < 30.0:
            other.partition_counts(["in"])  # any call of any process lets time pass
            if broker.records("in", 0):
                landed.append(scheduler.clock.monotonic())
            scheduler.clock.sleep(0.5)

    scheduler.spawn("writer", writer)
    scheduler.spawn("bystander", bystander)
    while scheduler.step() is not None:
        pass
    assert landed and 3.0 <= landed[0] <= 4.0
