"""A processor's start racing another's: the control log read just before another
processor's first start landed, and a growth that recorded its count before creating the
partitions, are waited out, not reported as a lost log or a shrunk topic (the simulation found
both as false alarms). And a start racing retention: records deleted after the start checked
them stop the processor."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from framework import App
from framework.config import ConfigError
from framework.coordination.control_guard import ControlLogLostError
from framework.coordination.layout import prepare_app
from framework.coordination.registry import TopicRegistry
from framework.kafka import LogRecord, OffsetResetError, TopicSpec
from framework.runtime.assignment import Assignment
from framework.runtime.clients import RunClients
from statestore import DatabaseIdentity, ProcessorDatabase
from tests.clocks import ManualClock
from tests.sim.app import INPUT, OUTPUT, make_app
from tests.sim.broker import Broker
from tests.sim.kafka import MemoryKafka


def _world(tmp_path: Path, *, registered: int = 2) -> tuple[MemoryKafka, ManualClock]:
    clock = ManualClock()
    kafka = MemoryKafka(Broker(random.Random(1)), clock)
    kafka.create_topics([TopicSpec(INPUT, 2), TopicSpec(OUTPUT, 2)])
    registry = TopicRegistry(kafka)
    registry.ensure_topic()
    registry.register(INPUT, registered)
    registry.register(OUTPUT, 2)
    return kafka, clock


def _app(tmp_path: Path) -> App:
    return make_app(
        tmp_path, partitions=2, initial_processors=2, max_records=5, lease_ms=2000, ready_lag=0
    )


class _SlowControlLogRead(MemoryKafka):
    """A port whose first read of the control log answers as of before another processor's
    first start landed (its app definition, then a processed batch's group commit)."""

    def __init__(self, kafka: MemoryKafka, app: App) -> None:
        super().__init__(kafka.broker, kafka.clock)
        self.app = app
        self.slowed = 0

    def read_log(self, topic: str, partition: int = 0) -> list[LogRecord]:
        answer = super().read_log(topic, partition)
        config = self.app.config
        if topic == config.control_topic and not self.slowed:
            self.slowed += 1
            other = MemoryKafka(self.broker, self.clock, name="processor-1")
            prepare_app(self.app, other, 1)
            with other.consumer(config.app_id) as consumer:
                consumer.commit({(INPUT, 1): 5})
        return answer


def test_a_control_log_read_just_before_another_first_start_is_read_again(
    tmp_path: Path,
) -> None:
    kafka, _clock = _world(tmp_path)
    app = _app(tmp_path)
    slow = _SlowControlLogRead(kafka, app)
    layout = prepare_app(app, slow, 0)
    assert slow.slowed == 1
    assert layout.processors == 2 and layout.control.app is not None


def test_a_control_log_that_stays_empty_under_group_offsets_is_still_refused(
    tmp_path: Path,
) -> None:
    kafka, clock = _world(tmp_path)
    app = _app(tmp_path)
    with kafka.consumer(app.config.app_id) as consumer:
        consumer.commit({(INPUT, 0): 3})
    with pytest.raises(ControlLogLostError, match="has no app definition"):
        prepare_app(app, kafka, 0)
    assert clock.sleeps == 2  # read three times, a second apart


def test_a_start_waits_for_the_partitions_a_growth_recorded(tmp_path: Path) -> None:
    kafka, clock = _world(tmp_path, registered=4)
    clock.on_sleep = lambda count: kafka.broker.grow(INPUT, 4) if count == 3 else None
    layout = prepare_app(_app(tmp_path), kafka, 0)
    assert layout.inputs[INPUT].partitions == 4 and clock.sleeps >= 3


def test_a_topic_that_never_gets_the_recorded_partitions_is_refused_naming_expand(
    tmp_path: Path,
) -> None:
    kafka, clock = _world(tmp_path, registered=4)
    with pytest.raises(ConfigError, match="run it again to finish the growth"):
        prepare_app(_app(tmp_path), kafka, 0)
    assert clock.now >= 30


def _started_with_five_records(
    tmp_path: Path, *, committed: int | None = None, deleted_before_start: int = 0
) -> tuple[MemoryKafka, RunClients, Assignment]:
    """Partition 0 of the input holding 5 records (the group processed ``committed`` of
    them; retention deleted those before ``deleted_before_start``), and processor 0's
    reading assigned to it from a new state directory."""
    kafka, clock = _world(tmp_path)
    app = _app(tmp_path)
    layout = prepare_app(app, kafka, 0)
    for i in range(5):
        record = {"key": b"k", "value": f"p:{i + 1}".encode(), "headers": ()}
        kafka.broker.append((INPUT, 0), {**record, "timestamp_ms": 0, "origin": "p"})
    if committed is not None:
        with kafka.consumer(app.config.app_id) as consumer:
            consumer.commit({(INPUT, 0): committed})
    if deleted_before_start:
        kafka.broker.delete_before(INPUT, 0, deleted_before_start)
    clients = RunClients.open(kafka, app.config.app_id, 30_000)
    database = ProcessorDatabase.in_memory(DatabaseIdentity(app.config.app_id, 0), [])
    reading = Assignment(0, clients.consumer, database, layout, clock)
    reading.assign({(INPUT, 0)})
    return kafka, clients, reading


def test_records_deleted_between_the_start_check_and_the_first_read_stop_the_rebuild(
    tmp_path: Path,
) -> None:
    """A lost state directory is rebuilt from offset 0; retention deleting the first records
    after the start checked what Kafka holds must stop it, not make it skip them (the
    simulation found a rebuild that started at the new earliest record, seed 369)."""
    kafka, clients, reading = _started_with_five_records(tmp_path, committed=5)
    assert reading.restore_below == {(INPUT, 0): 5}
    kafka.broker.delete_before(INPUT, 0, 2)  # retention, right after the start's check
    with pytest.raises(OffsetResetError):
        clients.consumer.consume(10, 0.0)


def test_a_partition_never_read_starts_at_the_earliest_record_when_retention_moves_it(
    tmp_path: Path,
) -> None:
    """Nothing of a partition the app never read was processed: retention deleting its first
    records right after the start's check moves where it starts, and stops nothing."""
    kafka, clients, _reading = _started_with_five_records(tmp_path, deleted_before_start=1)
    kafka.broker.delete_before(INPUT, 0, 3)  # retention again, right after the start's check
    assert [m.offset() for m in clients.consumer.consume(10, 0.0)] == [3, 4]
