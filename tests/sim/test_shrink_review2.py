"""Review 2 of issue 34's runtime (adversarial): scenarios the runtime gets wrong, each a
failing test until fixed. The world is ``test_shrink_runtime``'s (in-memory Kafka, registry
written by hand): 2 -> 4 -> 2 partitions, keys of 2 merge into 0, keys of 3 into 1.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from framework.coordination.registry import Growth, RegistryEntries, TopicRegistry
from framework.growth.markers import MARKER_HEADER, MarkerName
from framework.runtime.loop import ProcessorRuntime
from framework.runtime.stats import RuntimeStats
from rebalance import TopicHistory, key_hash
from tests.sim.app import INPUT
from tests.sim.test_shrink_runtime import K, World, before_the_shrink, shrunk


def put_drain_marker(world: World, deleted: int, step: int) -> int:
    """Append the drain marker `splitstate expand` writes to ``deleted``; its offset."""
    marker_id = MarkerName(2, deleted, step, drain=True).marker_id(INPUT)
    record = {
        "key": None,
        "value": orjson.dumps({"splitstate_marker": marker_id, "partition": deleted}),
        "headers": ((MARKER_HEADER, marker_id.encode()),),
        "timestamp_ms": 0,
        "origin": "expand",
    }
    return world.kafka.broker.append((INPUT, deleted), record).offset


def in_progress(world: World) -> tuple[int, TopicHistory]:
    """The shrink 4 -> 2 recorded, in progress, its drain markers written and not recorded:
    (2's drain marker's offset, the history)."""
    before_the_shrink(world)  # K's records at 2@0..2
    history = shrunk(world)
    entry = world.registry.read()[INPUT]
    ends = {2: world.end(2), 3: world.end(3)}
    change = Growth(2, 0, fence_ends=ends, kind="shrink")
    world.registry.write(replace(entry, history=history, growth=change))
    drain = put_drain_marker(world, 2, step=2)  # 2@3
    put_drain_marker(world, 3, step=2)  # 3@1
    return drain, history


def test_control_a_late_record_after_a_drain_marker_met_in_the_same_run_is_late(
    tmp_path: Path,
) -> None:
    world = World(tmp_path)
    in_progress(world)
    late = world.put(2, K, 4)  # 2@4, read in the same run as the marker
    world.run(steps=200)
    assert (2, late) in world.dead_letters()


def test_a_late_record_after_an_unrecorded_drain_marker_is_late_after_a_restart_too(
    tmp_path: Path,
) -> None:
    # `expand` wrote the drain markers and has not recorded them yet (killed there, or slow):
    # a processor that met the marker judges a record landing after it by the marker (late:
    # a dead letter), and so does every replay once the registry records the marker. A
    # processor restarted meanwhile has forgotten the marker it met: it must not judge the
    # same record otherwise (processed: state and outputs that no replay rebuilds).
    world = World(tmp_path)
    drain, history = in_progress(world)
    world.run(steps=200)
    assert world.committed(2) == drain + 1  # the marker is processed (met, unrecorded)
    late = world.put(2, K, 4)  # 2@4: a paused producer's record, placed with 4
    world.run(steps=200)  # a new run: restarted
    letters = world.dead_letters()
    # judged as the replay will: once `expand` records the drain at 2@3, 2@4 is late
    replayed = history.with_drains({2: drain, 3: 1})
    assert replayed.home_at(key_hash(K), 2, late) == 0
    assert (2, late) in letters, (
        f"live applied {K!r}'s record at {INPUT}[2]@{late} after a restart (outputs "
        f"{world.outputs()[K.decode()]}); every replay judges it late by the recorded drain"
    )


@pytest.mark.xfail(
    strict=True,
    reason="review2 finding 2: processing.confirm_markers re-reads for every batch with a "
    "record late by a current view",
)
def test_a_stream_of_late_records_reads_the_registry_once_not_once_per_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the view is current (the shrink and its drains recorded): a late record is late by it,
    # and no newer view can change that (no step is in progress). A producer that does not
    # follow the fence keeps writing to the deleted partition: each batch holding one of its
    # records reads the whole registry again.
    world = World(tmp_path)
    before_the_shrink(world)  # K's records at 2@0..2
    drain = put_drain_marker(world, 2, step=2)  # 2@3
    three = put_drain_marker(world, 3, step=2)  # 3@1
    world.record(shrunk(world).with_drains({2: drain, 3: three}))
    world.run(steps=100)
    reads = [0]
    real = TopicRegistry.read

    def counted(self: TopicRegistry) -> RegistryEntries:
        reads[0] += 1
        return real(self)

    monkeypatch.setattr(TopicRegistry, "read", counted)

    def reads_in_a_run(late: bool) -> int:
        reads[0], calls = 0, [0]
        lates: list[int] = []

        def feed(_stats: RuntimeStats) -> bool:
            calls[0] += 1
            if late and calls[0] % 5 == 0 and len(lates) < 20:
                lates.append(world.put(2, K, 4))  # arrives alone: its own batch
                world.seqs[K] -= 1
            return calls[0] > 150

        ProcessorRuntime(world.app, 0, kafka=world.kafka).run(until=feed)
        assert set(world.dead_letters()) >= {(2, at) for at in lates}
        return reads[0]

    quiet = reads_in_a_run(late=False)
    busy = reads_in_a_run(late=True)
    assert busy - quiet <= 2, f"20 late records read the registry {busy - quiet} more times"
