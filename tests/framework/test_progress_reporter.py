"""The progress reporter never makes processing wait on Kafka: a report is handed to its own
producer and never waited for, none is made while one is unconfirmed, failures are logged and
the producer made anew; a receiver's T2 is reported; the run's end says it stopped."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from framework.coordination.control_log import ControlWatcher
from framework.coordination.progress_reports import HEARTBEAT_SECONDS, ProcessorReport
from framework.kafka import DeliveryCallback, DeliveryError, Header, Kafka, KafkaIOError
from framework.runtime.reporting import ProgressReporter
from rebalance.control import ControlState
from statestore import ProcessorDatabase
from tests.clocks import ManualClock
from tests.rebalance.test_control import scale, started
from tests.sim.app import make_app
from tests.statestore.conftest import IDENTITY, STORES


class UnansweredProducer:
    """Takes records and never delivers them unless told (``deliver``)."""

    def __init__(self) -> None:
        self.records: list[tuple[str, bytes | None, bytes | None, int | None]] = []
        self.callbacks: list[DeliveryCallback] = []
        self.flushes: list[float] = []
        self.closed = False
        self.refuse: Exception | None = None

    def produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        *,
        headers: Sequence[Header] | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> None:
        if self.refuse is not None:
            raise self.refuse
        self.records.append((topic, key, value, partition))
        assert on_delivery is not None
        self.callbacks.append(on_delivery)

    def deliver(self, error: DeliveryError | None = None) -> None:
        self.callbacks.pop(0)(error, cast(Any, None))

    def poll(self, timeout: float = 0.0) -> int:
        assert timeout == 0  # the loop never waits for a report
        return 0

    def flush(self, timeout: float) -> int:
        self.flushes.append(timeout)
        return len(self.callbacks)

    def partition_count(self, topic: str) -> int:
        return 1

    def close(self) -> None:
        self.closed = True


class ProducerMaker:
    """The part of the Kafka port a reporter uses: a clock and new producers."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.made: list[UnansweredProducer] = []

    def producer(self, **_settings: Any) -> UnansweredProducer:
        self.made.append(UnansweredProducer())
        return self.made[-1]


class Watcher:
    def __init__(self, state: ControlState) -> None:
        self.state = state


def reporter(
    tmp_path: Path, state: ControlState, database: ProcessorDatabase | None = None
) -> tuple[ProgressReporter, ProducerMaker, ManualClock]:
    clock = ManualClock(1000.0, may_sleep=False)
    kafka = ProducerMaker(clock)
    app = make_app(
        tmp_path, partitions=4, initial_processors=2, max_records=10, lease_ms=1000, ready_lag=0
    )
    made = ProgressReporter(
        app,
        1,
        kafka=cast(Kafka, kafka),
        database=database or ProcessorDatabase.in_memory(IDENTITY, STORES),
        watcher=cast(ControlWatcher, Watcher(state)),
    )
    return made, kafka, clock


def reports(producer: UnansweredProducer) -> list[ProcessorReport]:
    return [ProcessorReport.decode(value) for _t, _k, value, _p in producer.records if value]


def test_an_unanswered_report_never_holds_the_loop_and_none_follows_it(tmp_path: Path) -> None:
    made, kafka, clock = reporter(tmp_path, started())
    made.tick()
    (producer,) = kafka.made
    assert len(producer.records) == 1
    assert producer.records[0][1] == b"processor/1" and producer.records[0][3] == 0
    for _ in range(10):  # Kafka never answers: ticks go on, none waits, none sends
        clock.now += 60
        made.tick()
    assert len(producer.records) == 1
    assert producer.flushes == []
    producer.deliver()  # delivered at last: the next due report goes out
    clock.now += 30
    made.tick()
    assert len(producer.records) == 2


def test_a_refused_report_is_logged_and_the_producer_made_anew(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    made, kafka, clock = reporter(tmp_path, started())
    made.tick()
    kafka.made[0].deliver()
    kafka.made[0].refuse = BufferError("queue full")
    clock.now += 31
    made.tick()  # no exception reaches the loop
    assert "could not write its progress report" in caplog.text
    assert kafka.made[0].closed
    clock.now += 31
    made.tick()
    assert len(kafka.made) == 2 and len(kafka.made[1].records) == 1


def test_a_report_that_failed_is_sent_again_though_nothing_changed(tmp_path: Path) -> None:
    made, kafka, clock = reporter(tmp_path, scale(started(), 1, 3))  # reports every 2 s
    made.tick()
    producer = kafka.made[0]
    producer.deliver(DeliveryError("timed out", "Local: Message timed out"))
    clock.now += 2
    made.tick()
    assert len(producer.records) == 2  # the same news, said again
    producer.deliver()
    clock.now += 1
    made.tick()
    assert len(producer.records) == 2  # not due yet


def test_each_report_says_when_the_next_is_due_and_it_comes_then(tmp_path: Path) -> None:
    """Every 2 s during a scale, though nothing changed (a killed processor is then known
    by its silence within seconds), every 30 s otherwise; each report says which."""
    made, kafka, clock = reporter(tmp_path, scale(started(), 1, 3))
    for _ in range(3):
        made.tick()
        kafka.made[0].deliver()
        clock.now += 2
    during = reports(kafka.made[0])
    assert len(during) == 3 and {r.every for r in during} == {2.0}
    assert during[0].same_news(during[-1])
    assert during[0].pid_space is not None  # this machine's boot and pid namespace
    settled, other, _clock = reporter(tmp_path, started())
    settled.tick()
    (first,) = reports(other.made[0])
    assert first.every == HEARTBEAT_SECONDS
    assert ProcessorReport.decode(first.encode()) == first


def test_a_receiver_reports_its_t2_and_its_end_says_stopped(tmp_path: Path) -> None:
    state = scale(started(), 1, 3)
    assert state.scaling is not None
    target = next(iter(state.scaling.handoffs.values())).target
    database = ProcessorDatabase.in_memory(IDENTITY, STORES)
    batch = database.begin()
    batch.set_progress("catchup-1", "in", 2, 1234)
    batch.commit()
    made, kafka, _clock = reporter(tmp_path, state, database)
    made._processor = target
    made.tick()
    made.close()
    producer = kafka.made[0]
    first, last = reports(producer)[0], reports(producer)[-1]
    assert first.catch_up_generation == 1
    assert first.catch_up == {("in", 2): 1234}
    assert not first.stopped
    assert len(producer.records) == 1  # the first was not confirmed: close sends no other
    producer.deliver()
    made2, kafka2, _clock2 = reporter(tmp_path, state, database)
    made2.close()
    (closing,) = reports(kafka2.made[0])
    assert closing.stopped
    assert kafka2.made[0].flushes == [2.0] and kafka2.made[0].closed
    assert last == first


def test_delivery_errors_from_kafka_are_not_raised(tmp_path: Path) -> None:
    made, kafka, clock = reporter(tmp_path, started())
    made.tick()
    kafka.made[0].deliver(DeliveryError("broker down", "Local: Broker transport failure"))
    kafka.made[0].refuse = KafkaIOError("no")
    clock.now += 31
    made.tick()
    assert kafka.made[0].closed
