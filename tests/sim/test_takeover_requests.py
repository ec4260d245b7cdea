"""What a receiver asks Kafka while it takes a partition over (issue 32, item 7).

It owns the partitions as soon as its COMPLETE is written, and first notes in its database
that the control log reaches past that record. It took that from a request for the log's
end, which on a real broker waits behind the watcher's own fetch of the idle log (the broker
answers one connection's requests in order, and holds a fetch up to ``fetch.wait.max.ms``,
500 ms): half a second of many handoff pauses. The append's answer proves as much, with no
request at all."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from unittest import mock

from framework import App
from framework.coordination.control_log import ControlLog
from framework.coordination.scaling import request_scale
from framework.kafka import Message
from framework.runtime.first_reads import TAKEOVER_WAIT_SECONDS
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


def _run_until(
    kafka: MemoryKafka,
    app: App,
    processor: int,
    phase: HandoffPhase | None,
    *,
    handoff: tuple[int, int] = (0, 1),
    also: Callable[[], bool] = lambda: True,
) -> None:
    """Run ``processor`` until ``handoff`` is in ``phase`` (``None``: the scale ended) and
    ``also()`` holds."""
    steps = 0

    def done(_stats: RuntimeStats) -> bool:
        nonlocal steps
        steps += 1
        assert steps < 2_000, f"processor {processor} never got {handoff} to {phase}"
        scale = _state(kafka, app).scaling
        if phase is None:
            return scale is None and also()
        return scale is not None and scale.handoffs[handoff].phase is phase and also()

    ProcessorRuntime(app, processor, kafka=kafka).run(until=done)


def _append(kafka: MemoryKafka, partition: int, count: int, start: int = 1) -> None:
    for seq in range(start, start + count):
        record = {"key": b"k", "value": f"p:{seq}".encode(), "headers": ()}
        kafka.broker.append((INPUT, partition), {**record, "timestamp_ms": 0, "origin": "p"})


def test_a_receiver_asks_for_no_control_log_end_after_its_complete(tmp_path: Path) -> None:
    kafka, app = one_key_world(tmp_path, records=0, seed=5, exactly_once=False)
    _append(kafka, 1, RECORDS)  # partition 1: processor 1's once scaled to 2
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


def test_a_receiver_that_reads_its_own_partitions_waits_briefly_until_the_moved_ones_come(
    tmp_path: Path,
) -> None:
    """A scale-in's receiver reads partitions of its own all along. After it took a partition
    over, its batches wait only briefly for records until that partition's first records
    came. They did until any records came: its own partitions' came first, and the next batch
    waited ``max_wait_ms`` for more while the moved partition's backlog since F was there."""
    kafka, app = one_key_world(tmp_path, records=0, seed=5, exactly_once=False)
    _append(kafka, 0, RECORDS)
    _append(kafka, 1, RECORDS)
    ProcessorRuntime(app, 0, kafka=kafka).run(until=lambda stats: stats.records >= 2 * RECORDS)
    request_scale(app, 2, kafka=kafka)  # processor 1 takes partition 1
    _run_until(kafka, app, 1, HandoffPhase.READY)
    _run_until(kafka, app, 0, HandoffPhase.RELEASED)
    _run_until(kafka, app, 1, None)
    request_scale(app, 1, kafka=kafka)  # processor 0 takes partition 1 back
    _run_until(kafka, app, 0, HandoffPhase.READY, handoff=(1, 0))
    _append(kafka, 1, RECORDS, RECORDS + 1)  # the moved partition's backlog since F
    _run_until(kafka, app, 1, HandoffPhase.RELEASED, handoff=(1, 0))
    _append(kafka, 0, 4 * app.config.batch.max_records, RECORDS + 1)  # its own, more
    # per consumer: its consumes' (timeout, partitions read), from the takeover's ``add`` on
    reads: dict[int, list[tuple[float, set[int]]]] = {}
    add, consume = MemoryConsumer.add, MemoryConsumer.consume

    def added(consumer: MemoryConsumer, starts: Mapping[Position, int | None]) -> None:
        if (INPUT, 1) in starts:
            reads[id(consumer)] = []
        add(consumer, starts)

    def consumed(consumer: MemoryConsumer, max_records: int, timeout: float) -> list[Message]:
        taken = reads.get(id(consumer))
        if taken == []:  # the moved partition's first fetch is not back yet (a round trip)
            consumer.pause([(INPUT, 1)])
        found = consume(consumer, max_records, timeout)
        if taken is not None:
            consumer.resume([(INPUT, 1)])
            taken.append((timeout, {m.partition() or 0 for m in found}))
        return found

    def moved_read() -> bool:
        return any(1 in partitions for taken in reads.values() for _t, partitions in taken)

    with (
        mock.patch.object(MemoryConsumer, "add", autospec=True, side_effect=added),
        mock.patch.object(MemoryConsumer, "consume", autospec=True, side_effect=consumed),
    ):
        _run_until(kafka, app, 0, None, handoff=(1, 0), also=moved_read)
    [taken] = reads.values()
    first = next(i for i, (_t, partitions) in enumerate(taken) if 1 in partitions)
    assert {0} in [partitions for _t, partitions in taken[:first]], taken  # its own came first
    assert max(timeout for timeout, _p in taken[: first + 1]) <= TAKEOVER_WAIT_SECONDS, taken
