"""An old owner that gets a moved partition back (its RELEASE refused: the receiver stopped
first; or it died after committing F, before writing RELEASE) resumes it at F. When its state
had no offset there (it never read a record of it: retention deleted them all before it
started, or the partition holds only aborted transactions), the group's F looked like
records its state lacked, and taking the partition back demanded a rebuild from offset 0
that retention made impossible: the old owner stopped (issue 32, carried over from item 6)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path

import orjson
import pytest

from framework import App
from framework.coordination.control_log import ControlLog
from framework.coordination.registry import TopicRegistry
from framework.coordination.scaling import request_scale
from framework.kafka import KafkaIOError, TopicSpec
from framework.runtime.loop import ProcessorRuntime, RuntimeStats
from rebalance import HandoffEvent, HandoffPhase, bucket, key_hash
from rebalance.control import ControlState, handoff_record
from rebalance.control_records import instance_record
from rebalance.control_stops import stopped_record
from statestore import ProcessorDatabase, processor_path
from tests.clocks import ManualClock
from tests.sim.app import INPUT, OUTPUT, make_app
from tests.sim.broker import Broker
from tests.sim.kafka import MemoryKafka

MOVED = (INPUT, 1)
RECEIVER = "receiver-run"
#: offsets of partition 1 that retention deleted before processor 0 first read it
DELETED = 3


def _key(partition: int) -> bytes:
    return next(
        key
        for key in (f"k{i}".encode() for i in range(100))
        if bucket(key_hash(key), 2, 2) == partition
    )


def _write(kafka: MemoryKafka, partition: int, seqs: Sequence[int]) -> None:
    for seq in seqs:
        record = {"key": _key(partition), "value": f"p:{seq}".encode(), "headers": ()}
        kafka.broker.append((INPUT, partition), {**record, "timestamp_ms": 0, "origin": "p"})


class _Processor0(MemoryKafka):
    """Processor 0's port. ``at_release``: what happens as it writes RELEASE (``"refused"``:
    the receiver's ``stopped`` lands just before it; ``"crash"``: the process dies first)."""

    def __init__(self, kafka: MemoryKafka, app: App, at_release: str) -> None:
        super().__init__(kafka.broker, kafka.clock, name="processor-0")
        self.app = app
        self.at_release = at_release
        self.releases: list[dict[str, object]] = []

    def append(self, topic: str, records: Sequence[tuple[bytes, bytes | None]]) -> int:
        facts = [orjson.loads(value) for _key, value in records if value is not None]
        release = [f for f in facts if f.get("event") == HandoffEvent.RELEASE.value]
        if release and self.at_release == "crash":
            self.at_release = ""
            raise KafkaIOError("(test: processor 0 dies before RELEASE is written)")
        if release and self.at_release == "refused":
            self.at_release = ""
            receiver = ControlLog(MemoryKafka(self.broker, self.clock), topic)
            generation = release[0]["generation"]
            receiver.append(stopped_record(generation, 1, "a test", at=None, instance=RECEIVER))
            end = super().append(topic, records)
            self.releases += release
            _write(self, 1, [1, 2])  # processor 0 gets these once it took partition 1 back
            return end
        end = super().append(topic, records)
        self.releases += release
        return end


def _ready_scale(tmp_path: Path) -> tuple[App, MemoryKafka]:
    """Processor 0 of 1 has read partition 0; partition 1's records were deleted before it
    started (it holds no offset for it); a scale to 2 has its handoff READY."""
    clock = ManualClock()
    kafka = MemoryKafka(Broker(random.Random(1)), clock)
    kafka.create_topics([TopicSpec(INPUT, 2), TopicSpec(OUTPUT, 2)])
    registry = TopicRegistry(kafka)
    registry.ensure_topic()
    registry.register(INPUT, 2)
    registry.register(OUTPUT, 2)
    _write(kafka, 0, [1, 2, 3, 4])
    _write(kafka, 1, range(1, DELETED + 1))
    kafka.broker.delete_before(INPUT, 1, DELETED)
    # joiners bootstrap from snapshots (a scale by replay is refused after retention); the
    # runs here take none (``snapshots=False``): the receiver is played by the test
    app = make_app(
        tmp_path,
        partitions=2,
        initial_processors=1,
        max_records=5,
        lease_ms=2000,
        ready_lag=0,
        snapshots=True,
    )
    _run(app, kafka, lambda stats: stats.records >= 4)
    generation = request_scale(app, 2, kafka).generation
    receiver = ControlLog(kafka, app.config.control_topic)
    receiver.append(instance_record(1, RECEIVER))  # the receiver's run (played by the test)
    for event in (HandoffEvent.START_CATCH_UP, HandoffEvent.CAUGHT_UP):
        receiver.append(handoff_record(generation, 0, 1, event, instance=RECEIVER))
    assert _state(app, kafka).scaling is not None
    return app, kafka


def _run(app: App, kafka: MemoryKafka, done: Callable[[RuntimeStats], bool]) -> RuntimeStats:
    """Run processor 0 until ``done``, or a minute passed on the simulated clock (a run that
    would go on for ever)."""
    clock = kafka.clock
    deadline = clock.monotonic() + 60
    runtime = ProcessorRuntime(app, 0, kafka=kafka, snapshots=False)
    return runtime.run(until=lambda stats: done(stats) or clock.monotonic() > deadline)


def _state(app: App, kafka: MemoryKafka) -> ControlState:
    return ControlLog(kafka, app.config.control_topic).read()


def _offsets(app: App) -> dict[tuple[str, int], int]:
    database = ProcessorDatabase.open_read_only(processor_path(app.config.app_state_dir, 0))
    try:
        return database.offsets()
    finally:
        database.close()


def test_a_refused_release_of_a_partition_without_a_state_offset_is_taken_back_at_f(
    tmp_path: Path,
) -> None:
    app, kafka = _ready_scale(tmp_path)
    port = _Processor0(kafka, app, "refused")
    stats = _run(app, port, lambda s: s.records >= 2)
    assert [r["offsets"] for r in port.releases] == [[[INPUT, 1, DELETED]]]
    scale = _state(app, kafka).scaling
    assert scale is not None and set(scale.stopped) == {1}
    assert scale.handoffs[(0, 1)].phase is HandoffPhase.READY  # the RELEASE was refused
    # processor 0 took partition 1 back at F and processed what came after, no rebuild
    assert stats.records == 2 and stats.restored == 0
    assert _offsets(app)[MOVED] == DELETED + 2
    with kafka.consumer(app.config.app_id) as consumer:
        assert consumer.committed([MOVED]) == {MOVED: DELETED + 2}


def test_an_old_owner_dead_between_committing_f_and_release_resumes_at_f(
    tmp_path: Path,
) -> None:
    app, kafka = _ready_scale(tmp_path)
    with pytest.raises(KafkaIOError, match="dies before RELEASE"):
        _run(app, _Processor0(kafka, app, "crash"), lambda _s: False)
    with kafka.consumer(app.config.app_id) as consumer:
        assert consumer.committed([MOVED]) == {MOVED: DELETED}  # F was committed
    # the restart owns partition 1 again until it releases it (no rebuild from offset 0)
    port = _Processor0(kafka, app, "")
    _run(app, port, lambda _s: bool(port.releases))
    assert [r["offsets"] for r in port.releases] == [[[INPUT, 1, DELETED]]]
    scale = _state(app, kafka).scaling
    assert scale is not None and scale.handoffs[(0, 1)].phase is HandoffPhase.RELEASED
