"""What a receiver asks Kafka while it takes a partition over (issue 32, item 7).

It owns the partitions as soon as its COMPLETE is written, and first notes in its database
that the control log reaches past that record. It took that from a request for the log's
end, which on a real broker waits behind the watcher's own fetch of the idle log (the broker
answers one connection's requests in order, and holds a fetch up to ``fetch.wait.max.ms``,
500 ms): half a second of many handoff pauses. The append's answer proves as much, with no
request at all."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from unittest import mock

from framework import App
from framework.coordination.control_log import ControlLog
from framework.coordination.scaling import request_scale
from framework.runtime.loop import ProcessorRuntime, RuntimeStats
from rebalance import HandoffPhase
from rebalance.control import ControlState
from rebalance.positions import OffsetRange, Position
from tests.sim.app import INPUT
from tests.sim.broker import StoredRecord
from tests.sim.consumer import MemoryConsumer
from tests.sim.kafka import MemoryKafka
from tests.sim.one_key import one_key_world

RECORDS = 10
_watermarks = MemoryConsumer.watermarks


def _state(kafka: MemoryKafka, app: App) -> ControlState:
    return ControlLog(kafka, app.config.control_topic).read()


def _run_until(kafka: MemoryKafka, app: App, processor: int, phase: HandoffPhase | None) -> None:
    """Run ``processor`` until the handoff 0 -> 1 is in ``phase`` (``None``: the scale ended)."""
    steps = 0

    def done(_stats: RuntimeStats) -> bool:
        nonlocal steps
        steps += 1
        assert steps < 2_000, f"processor {processor} never got the handoff to {phase}"
        scale = _state(kafka, app).scaling
        if phase is None:
            return scale is None
        return scale is not None and scale.handoffs[(0, 1)].phase is phase

    ProcessorRuntime(app, processor, kafka=kafka).run(until=done)


def test_a_receiver_asks_for_no_control_log_end_after_its_complete(tmp_path: Path) -> None:
    kafka, app = one_key_world(tmp_path, records=0, seed=5, exactly_once=False)
    for seq in range(1, RECORDS + 1):  # partition 1: processor 1's once scaled to 2
        record = {"key": b"k", "value": f"p:{seq}".encode(), "headers": ()}
        kafka.broker.append((INPUT, 1), {**record, "timestamp_ms": 0, "origin": "p"})
    topic = app.config.control_topic
    events: list[str] = []

    def written(record: StoredRecord) -> None:
        if record.topic == topic and record.value is not None:
            fact = json.loads(record.value)
            events.append(f"{fact.get('type')} {fact.get('event')}")

    def watermarks(
        consumer: MemoryConsumer, positions: Iterable[Position]
    ) -> dict[Position, OffsetRange]:
        wanted = list(positions)
        events.extend(f"end of {t}" for t, _p in wanted if t == topic)
        return _watermarks(consumer, wanted)

    kafka.broker.watchers.append(written)
    ProcessorRuntime(app, 0, kafka=kafka).run(until=lambda stats: stats.records >= RECORDS)
    request_scale(app, 2, kafka=kafka)
    with mock.patch.object(MemoryConsumer, "watermarks", autospec=True, side_effect=watermarks):
        _run_until(kafka, app, 1, HandoffPhase.READY)
        _run_until(kafka, app, 0, HandoffPhase.RELEASED)
        _run_until(kafka, app, 1, None)
    complete = events.index("handoff COMPLETE")
    assert f"end of {topic}" in events[:complete]  # asked at each run's start, as before
    assert f"end of {topic}" not in events[complete:], events[complete:]
