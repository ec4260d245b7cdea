"""`splitstate expand` down and up again, on the in-memory Kafka: a shrink's steps (the
holds recorded with the count, the fence, a drain marker in each deleted partition, the
drains recorded), each resumed after a crash there; a growth that re-uses deleted
partitions; and the refusals, each writing nothing."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest

from framework.coordination.control_log import ControlLog
from framework.coordination.registry import REGISTRY_TOPIC, TopicEntry, TopicRegistry
from framework.growth import marker_log
from framework.growth.compaction import COMPACTION_HEADER
from framework.growth.compaction_writes import CompactionTombstones
from framework.growth.expand import ExpandError, StopAfter, expand_topic
from framework.growth.markers import MARKER_HEADER
from framework.growth.placement import LinearHashPartitioner, produce_placed
from framework.kafka import KafkaConsumer, TopicSpec
from rebalance import Grow, Shrink, key_hash
from rebalance.control import AppDefinition, Generation, history_record
from rebalance.record_checks import MAX_PARTITIONS
from tests.clocks import ManualClock
from tests.sim.broker import Broker
from tests.sim.kafka import MemoryKafka

TOPIC = "in"
CONTROL = "app-control"


@dataclass
class World:
    """A broker with input ``in`` (N = 4) registered, an app's control log (B = 2, P = 2)
    and what ``expand`` reported."""

    clock: ManualClock
    kafka: MemoryKafka
    control: ControlLog
    lines: list[str] = field(default_factory=list)

    def expand(self, partitions: int, stop_after: StopAfter | None = None) -> TopicEntry:
        return expand_topic(
            self.kafka,
            TOPIC,
            partitions,
            control=self.control,
            report=self.lines.append,
            stop_after=stop_after,
        )

    def entry(self) -> TopicEntry:
        entry = TopicRegistry(self.kafka).read().get(TOPIC)
        assert entry is not None
        return entry

    def write(self, partition: int, count: int = 3) -> None:
        """``count`` records (keys irrelevant here) at the end of ``in[partition]``."""
        producer = self.kafka.producer()
        for i in range(count):
            producer.produce(TOPIC, b"{}", f"k{i}".encode(), partition)
        assert producer.flush(5) == 0

    def end(self, partition: int) -> int:
        return self.kafka.broker.end_offset(TOPIC, partition)

    def markers(self, partition: int) -> list[tuple[int, bytes, bytes | None]]:
        """``(offset, header, key)`` of each marker in ``in[partition]``."""
        return [
            (r.offset, value, r.key)
            for r in self.kafka.broker.records(TOPIC, partition)
            for name, value in r.headers or ()
            if name == MARKER_HEADER and isinstance(value, bytes)
        ]

    def written(self) -> tuple[int, int]:
        """How many records the registry and the control log hold."""
        broker = self.kafka.broker
        return len(broker.records(REGISTRY_TOPIC, 0)), len(broker.records(CONTROL, 0))


def new_world(processors: int = 2, config: dict[str, str] | None = None) -> World:
    clock = ManualClock()
    kafka = MemoryKafka(Broker(random.Random(0)), clock)
    kafka.create_topics([TopicSpec(TOPIC, 4, config=config)])
    registry = TopicRegistry(kafka)
    registry.ensure_topic()
    registry.register(TOPIC, 4, lease_ms=1000, delivery_timeout_ms=1000)
    control = ControlLog(kafka, CONTROL)
    control.ensure_topic()
    control.append(
        AppDefinition("app", 2, {TOPIC: 4}).to_record(), Generation(0, processors).to_record()
    )
    world = World(clock, kafka, control)
    for p in range(4):
        world.write(p)
    return world


@pytest.fixture
def world() -> Iterator[World]:
    yield new_world()


def grown_to_8(world: World) -> None:
    world.expand(8)
    for p in range(8):
        world.write(p)


def test_a_shrink_records_holds_with_the_count_then_a_drain_marker_in_each_deleted_partition(
    world: World,
) -> None:
    grown_to_8(world)
    ends = {p: world.end(p) for p in range(8)}
    world.lines.clear()
    entry = world.expand(5)

    history = entry.history
    assert history.counts == (4, 8, 5)
    assert history.partitions == 5 and history.created == 8
    assert list(history.deleted()) == [5, 6, 7]
    step = history.steps[-1]
    assert isinstance(step, Shrink)
    assert dict(step.holds) == {1: ends[1], 2: ends[2], 3: ends[3]}  # 5->1, 6->2, 7->3
    for d in (5, 6, 7):  # each drain marker at the end of its deleted partition, named
        ((offset, header, key),) = world.markers(d)
        assert offset == ends[d] == step.drains[d]
        assert header == f"in/2/5/{d}/drain".encode()
        assert key is None  # not compacted: no key
    assert entry.growth is None and world.entry() == entry
    assert world.control.read().growth is None  # released
    assert world.kafka.partition_counts([TOPIC]) == {TOPIC: 8}  # Kafka keeps them
    assert world.lines[0] == (
        f"shrink in 8 -> 5: recorded (holds: 1@{ends[1]} 2@{ends[2]} 3@{ends[3]}); producers "
        "switch within their lease (1000 ms)"
    )
    assert world.lines[1].startswith("waiting 3.0s: producers' lease (1000 ms)")
    assert world.lines[2:5] == [
        f"drain marker for partition {d} at in[{d}]@{ends[d]}" for d in (5, 6, 7)
    ]
    assert world.lines[5] == (
        "in now has 5 partitions (4 -> 8 -> 5); drain markers recorded; deleted: 5, 6, 7"
    )


@pytest.mark.parametrize("stop_after", ["recorded", "fenced", "marked", "unreleased"])
def test_a_shrink_stopped_after_any_step_is_finished_by_the_same_command(
    world: World, stop_after: StopAfter
) -> None:
    grown_to_8(world)
    ends = {p: world.end(p) for p in range(8)}
    stopped = world.expand(5, stop_after=stop_after)
    assert world.entry() == stopped
    assert world.control.read().growth is not None  # still held: no scale meanwhile
    if stop_after in ("recorded", "fenced", "marked"):
        change = stopped.growth
        assert change is not None and (change.kind, change.partitions) == ("shrink", 5)
        assert (change.fence_ends is None) == (stop_after == "recorded")
        assert stopped.history.counts == (4, 8, 5)  # the count and holds in one write
        step = stopped.history.steps[-1]
        assert isinstance(step, Shrink) and dict(step.drains) == {}
        assert dict(step.holds) == {1: ends[1], 2: ends[2], 3: ends[3]}
        assert stopped.pending() == [5, 6, 7]
    else:
        assert stopped.growth is None and stopped.pending() == []
    written = [len(world.markers(d)) for d in (5, 6, 7)]
    assert written == ([1, 0, 0] if stop_after == "marked" else [0, 0, 0] if
                       stop_after != "unreleased" else [1, 1, 1])  # fmt: skip
    for p in range(4):  # records keep landing meanwhile
        world.write(p)

    world.lines.clear()
    finished = world.expand(5)
    step = finished.history.steps[-1]
    assert isinstance(step, Shrink)
    for d in (5, 6, 7):  # one drain marker each: the one written before is found again
        ((offset, _header, _key),) = world.markers(d)
        assert step.drains[d] == offset == ends[d]
    assert finished.growth is None and finished.history.counts == (4, 8, 5)
    assert world.control.read().growth is None
    growths = [r for r in world.kafka.read_log(CONTROL) if r.value and b'"growth"' in r.value]
    assert len(growths) == 2  # one hold for 4 -> 8, one for 8 -> 5: the rerun adopted it
    if stop_after == "unreleased":
        assert world.lines[-1] == "in already has 5 partitions; nothing to do"
    else:
        assert any(line.startswith("resuming the shrink of in to 5") for line in world.lines)


def test_a_growth_re_uses_deleted_partitions_from_their_end_and_names_its_step(
    world: World,
) -> None:
    grown_to_8(world)
    world.expand(5)
    late = {5: 2, 6: 1}  # records landing in deleted partitions after their drain markers
    for d, count in late.items():
        world.write(d, count)
    ends = {p: world.end(p) for p in range(8)}
    world.lines.clear()
    entry = world.expand(7)
    assert world.kafka.partition_counts([TOPIC]) == {TOPIC: 8}  # nothing created
    assert not any(line.startswith("created") for line in world.lines)
    assert world.lines[0] == (
        f"recorded in: 5 -> 7 partitions (re-used, from 5@{ends[5]} 6@{ends[6]}); producers "
        "switch within their lease (1000 ms)"
    )
    history = entry.history
    assert history.counts == (4, 8, 5, 7) and list(history.deleted()) == [7]
    step = history.steps[-1]
    assert isinstance(step, Grow)
    assert dict(step.starts) == {5: ends[5], 6: ends[6]}  # measured before the count
    for child, up in ((5, 1), (6, 2)):  # markers in the parents, named with step 3
        headers = [h for _o, h, _k in world.markers(up)]
        assert headers == [f"in/1/8/{child}".encode(), f"in/3/7/{child}".encode()]
        assert step.markers[child] == world.markers(up)[-1][0]
    assert history.thresholds[5] == step.markers[5]  # the last growth's
    # the record of a re-used partition between its drain marker and its new life is late
    drain = history.steps[1]
    assert isinstance(drain, Shrink)
    assert history.step_at(5, drain.drains[5] + 1) == 2
    assert history.step_at(5, ends[5]) == 3


def test_the_same_count_and_partition_again_is_a_new_step_with_its_own_markers(
    world: World,
) -> None:
    world.expand(6)
    world.write(0)
    world.expand(4)
    world.write(0)
    fence_end = world.end(0)
    entry = world.expand(6)  # 4 -> 6 -> 4 -> 6: `in/6/4` twice, told apart by the step
    assert entry.history.counts == (4, 6, 4, 6)
    headers = [h for _o, h, _k in world.markers(0)]
    assert headers == [b"in/1/6/4", b"in/3/6/4"]
    step = entry.history.steps[-1]
    assert isinstance(step, Grow) and step.markers[4] >= fence_end
    drains = [h for _o, h, _k in world.markers(4)]
    assert drains == [b"in/2/4/4/drain"]


def test_a_resumed_growth_does_not_take_an_old_id_of_an_earlier_growth_for_its_marker(
    world: World,
) -> None:
    world.expand(6)
    world.expand(4)
    world.expand(6, stop_after="fenced")  # the second growth to 6, fenced
    producer = world.kafka.producer()  # then `in/6/4` (the first growth's id) lands in 0
    producer.produce(TOPIC, b"{}", None, 0, headers=[(MARKER_HEADER, b"in/6/4")])
    assert producer.flush(5) == 0
    entry = world.expand(6)
    headers = [(o, h) for o, h, _k in world.markers(0)]
    assert [h for _o, h in headers] == [b"in/1/6/4", b"in/6/4", b"in/3/6/4"]
    step = entry.history.steps[-1]
    assert isinstance(step, Grow) and step.markers[4] == headers[-1][0]


def test_an_old_growth_in_progress_is_finished_with_the_marker_its_older_expand_wrote(
    world: World,
) -> None:
    # a growth recorded (with its fence) by a splitstate before marker ids named their step,
    # whose marker for 4 was written as `in/6/4` before it stopped (its record: no steps)
    old = {
        "topic": TOPIC,
        "initial_partitions": 4,
        "counts": [4, 6],
        "thresholds": {},
        "lease_ms": 1000,
        "delivery_timeout_ms": 1000,
        "growth": {"partitions": 6, "recorded_ms": 0, "fence_ends": {"0": 3, "1": 3}},
    }
    world.kafka.append(REGISTRY_TOPIC, [(TOPIC.encode(), orjson.dumps(old))])
    world.kafka.create_partitions(TOPIC, 6)
    producer = world.kafka.producer()
    producer.produce(TOPIC, b"{}", None, 0, headers=[(MARKER_HEADER, b"in/6/4")])
    assert producer.flush(5) == 0
    entry = expand_topic(world.kafka, TOPIC, 6, report=world.lines.append)
    step = entry.history.steps[-1]
    assert isinstance(step, Grow)
    assert step.markers[4] == 3  # found again, not written twice
    assert [h for _o, h, _k in world.markers(0)] == [b"in/6/4"]
    assert [h for _o, h, _k in world.markers(1)] == [b"in/1/6/5"]


def test_markers_of_a_compacted_topic_have_their_id_as_key() -> None:
    world = new_world(config={"cleanup.policy": "compact"})
    world.expand(8)
    entry = world.expand(5)
    assert entry.compacted
    for d in (5, 6, 7):
        ((_offset, header, key),) = world.markers(d)
        assert key == header == f"in/2/5/{d}/drain".encode()
    ((_offset, header, key),) = world.markers(0)
    assert key == header == b"in/1/8/4"


def refused(world: World, partitions: int) -> str:
    """The refusal of ``expand`` to ``partitions``, checking it wrote nothing."""
    before = world.written()
    with pytest.raises(ExpandError) as error:
        world.expand(partitions)
    assert world.written() == before
    return str(error.value)


def test_a_shrink_below_the_initial_count_is_refused_and_writes_nothing(world: World) -> None:
    grown_to_8(world)
    message = refused(world, 3)
    assert "began with 4" in message and "never goes below the initial count" in message
    assert "Fix: ask for 4 partitions or more" in message


def test_a_shrink_below_the_processor_count_is_refused_and_writes_nothing() -> None:
    world = new_world(processors=6)
    world.expand(8)
    message = refused(world, 5)
    assert "the app runs 6 processors, more than the 5 partitions" in message
    assert "Fix: scale in first" in message
    assert world.expand(6).history.counts == (4, 8, 6)  # as many as processors: fine


def test_a_change_while_another_is_in_progress_is_refused_and_writes_nothing(
    world: World,
) -> None:
    grown_to_8(world)
    world.expand(5, stop_after="recorded")
    message = refused(world, 6)
    assert "a shrink of 'in' to 5 partitions is in progress" in message
    assert "Fix: finish it first (`splitstate expand ... --topic in --partitions 5`)" in message
    world.expand(5)
    world.expand(7, stop_after="fenced")
    message = refused(world, 5)
    assert "a growth of 'in' to 7 partitions is in progress" in message


def start_scale(world: World, processors: int) -> None:
    """A scale to ``processors`` in progress in the control log."""
    scale = {
        "type": "scale",
        "generation": 1,
        "processors": processors,
        "partitions": {TOPIC: world.entry().partitions},
        "histories": {TOPIC: history_record(world.entry().history)},
        "request": "r",
    }
    world.control.append(scale)
    assert world.control.read().scaling is not None


def test_a_shrink_during_a_scale_is_refused_and_writes_nothing(world: World) -> None:
    grown_to_8(world)
    start_scale(world, 3)
    message = refused(world, 5)
    assert "is scaling to 3 processors" in message and "Fix: wait until the scale" in message


def test_during_a_scale_a_shrink_below_the_processors_is_refused_for_the_scale() -> None:
    world = new_world(processors=6)
    world.expand(8)
    start_scale(world, 7)  # "scale in first" could not be done now: the scale is named
    message = refused(world, 5)
    assert "is scaling to 7 processors" in message and "scale in first" not in message


def test_a_partition_added_by_hand_is_refused_against_the_partitions_ever_created(
    world: World,
) -> None:
    grown_to_8(world)
    world.expand(5)
    world.kafka.create_partitions(TOPIC, 9)  # by hand, past the 8 created
    message = refused(world, 7)
    assert "already has 9 partitions in Kafka" in message and "registry records 8" in message
    entry = world.expand(9)
    assert entry.history.counts == (4, 8, 5, 9)
    step = entry.history.steps[-1]
    assert isinstance(step, Grow) and sorted(step.starts) == [5, 6, 7, 8]


def test_a_count_above_the_maximum_is_refused_and_writes_nothing(world: World) -> None:
    message = refused(world, MAX_PARTITIONS + 1)
    assert f"at most {MAX_PARTITIONS} partitions per input topic" in message
    assert f"Fix: ask for {MAX_PARTITIONS} partitions or fewer" in message


def test_a_shrink_measures_holds_at_the_high_watermark_under_an_open_transaction(
    world: World,
) -> None:
    grown_to_8(world)
    producer = world.kafka.transactional_producer("tx")
    producer.begin()  # a transaction left open over records of survivor 1
    producer.produce(TOPIC, b"{}", b"k", 1)
    assert producer.flush(5) == 0
    assert world.kafka.watermarks_of([(TOPIC, 1)])[(TOPIC, 1)].end < world.end(1)
    ends = {p: world.end(p) for p in (1, 2, 3)}
    step = world.expand(5, stop_after="recorded").history.steps[-1]
    assert isinstance(step, Shrink)
    assert dict(step.holds) == ends  # above the open transaction's record, not below it
    producer.abort(5)


def test_a_second_run_that_measures_after_the_first_recorded_its_fence_adopts_it(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs of the same shrink: the first records the count; the second resumes it and
    waits the fence; just before it measures the fence ends, the first (resumed too) records
    them and writes the first drain marker. The second adopts those fence ends, so it finds
    that marker instead of writing a second one above it."""
    grown_to_8(world)
    world.expand(5, stop_after="recorded")
    consumer = world.kafka.consumer
    raced: list[bool] = []

    def racing(group_id: str, **options: Any) -> KafkaConsumer:
        if group_id == "splitstate-expand" and not raced:
            raced.append(True)
            world.expand(5, stop_after="marked")  # the other run, meanwhile
        return consumer(group_id, **options)

    monkeypatch.setattr(world.kafka, "consumer", racing)
    entry = world.expand(5)
    assert raced
    assert any(line == "the fence ends of in were recorded by another run" for line in world.lines)
    step = entry.history.steps[-1]
    assert isinstance(step, Shrink)
    for d in (5, 6, 7):
        ((offset, _header, _key),) = world.markers(d)
        assert step.drains[d] == offset


def test_two_runs_that_each_wrote_a_marker_record_the_first_in_the_log(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs of the same shrink both looked for the drain marker of 5, found none, and
    wrote one: the first in the log is the marker processors meet first, so whichever run
    records the drains records that one."""
    grown_to_8(world)
    world.expand(5, stop_after="fenced")
    real = marker_log.write_marker
    raced: list[int] = []

    def racing(producer: Any, topic: str, partition: int, *args: Any, **options: Any) -> int:
        if not raced:  # the other run's marker lands first
            raced.append(real(producer, topic, partition, *args, **options))
        return real(producer, topic, partition, *args, **options)

    monkeypatch.setattr("framework.growth.expand_markers.write_marker", racing)
    entry = world.expand(5)
    first, second = (offset for offset, _header, _key in world.markers(5))
    assert raced == [first] and second > first
    step = entry.history.steps[-1]
    assert isinstance(step, Shrink)
    assert step.drains[5] == first


def test_a_compacted_topic_announces_the_change_and_records_its_count_a_fence_later() -> None:
    world = new_world(config={"cleanup.policy": "compact"})
    world.expand(8)
    world.lines.clear()
    announced = world.expand(5, stop_after="announced")  # killed in the announced phase
    change = announced.announced
    assert change is not None and (change.kind, change.partitions) == ("shrink", 5)
    assert announced.growth is None and announced.history.counts == (4, 8)  # not recorded
    assert world.entry() == announced and not world.entry().pending()
    assert world.lines[0].startswith("announced the shrink of in to 5 partitions")
    assert world.control.read().growth is not None  # held: no scale meanwhile
    assert "a shrink of 'in' to 5 partitions is in progress" in refused(world, 6)
    world.clock.now += 1.5  # half the fence (3 s with the margin) passed before the rerun

    world.lines.clear()
    entry = world.expand(5)
    assert world.lines[1] == "resuming the shrink of in to 5 partitions (announced)"
    assert world.lines[2].startswith("waiting 1.5s: producers' lease")  # the rest of it
    assert entry.announced is None and entry.growth is None
    assert entry.history.counts == (4, 8, 5)
    recorded = [r for r in world.kafka.read_log(REGISTRY_TOPIC) if r.value is not None]
    written = [TopicEntry.from_record(orjson.loads(r.value or b"{}")) for r in recorded]
    count_write = next(e for e in written if e.history.counts == (4, 8, 5))
    assert count_write.growth is not None and count_write.growth.fence_ends is None
    assert count_write.growth.recorded_ms >= change.announced_ms + 3000  # a fence later


def test_a_topic_not_compacted_records_its_count_at_once(world: World) -> None:
    entry = world.expand(8, stop_after="announced")  # no announced phase: the count
    assert entry.announced is None and entry.history.counts == (4, 8)
    assert entry.growth is not None


def test_producers_write_no_compaction_tombstone_while_a_change_is_in_progress() -> None:
    world = new_world(config={"cleanup.policy": "compact"})
    world.expand(8)
    key = next(k for k in (f"k{i}".encode() for i in range(1000)) if key_hash(k) % 8 == 5)
    tombstones = CompactionTombstones()

    def tombstones_written(entry: TopicEntry) -> list[int]:
        producer = world.kafka.producer()
        partitioner = LinearHashPartitioner({TOPIC: entry})
        before = {p: world.end(p) for p in range(8)}
        produce_placed(producer, lambda: partitioner, TOPIC, key, b"v", tombstones=tombstones)
        assert producer.flush(5) == 0
        return [
            r.partition
            for p in range(8)
            for r in world.kafka.broker.records(TOPIC, p)[before[p] :]
            if any(name == COMPACTION_HEADER for name, _v in r.headers or ())
        ]

    assert tombstones_written(world.entry()) == [1]  # 4 -> 8: its earlier home 1
    for stop_after in ("announced", "recorded", "fenced"):
        assert tombstones_written(world.expand(5, stop_after=stop_after)) == []
    assert tombstones_written(world.expand(5)) == [5]  # done: its first write after it
    assert tombstones_written(world.entry()) == []  # remembered
