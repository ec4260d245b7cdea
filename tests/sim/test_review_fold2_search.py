"""Review 2 of the fold (adversarial): the marker search of a processor that reads a partition
past its fence end (``PlacementCheck._search_markers``), in the runtime. The world is
``test_shrink_runtime``'s (in-memory Kafka, registry written by hand): 2 -> 4 -> 2
partitions, keys of 2 merge into 0 with 2 partitions; here the shrink is in progress, fenced.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from framework.coordination.registry import Growth
from framework.kafka import KafkaIOError
from rebalance import TopicHistory
from tests.sim.app import INPUT
from tests.sim.test_shrink_review2 import put_drain_marker
from tests.sim.test_shrink_runtime import K, World, before_the_shrink, shrunk


def fenced(world: World) -> TopicHistory:
    """The shrink 4 -> 2 recorded and fenced (fence ends: 2@3, 3@1), no drain written yet."""
    before_the_shrink(world)  # K's records at 2@0..2
    history = shrunk(world)
    entry = world.registry.read()[INPUT]
    ends = {2: world.end(2), 3: world.end(3)}
    change = Growth(2, 0, fence_ends=ends, kind="shrink")
    world.registry.write(replace(entry, history=history, growth=change))
    return history


# fixed: review-fold2 finding 7: a KafkaIOError of the marker search is raised inside the batch,
# after the crash guard's attempt: each one counts as a crash of the record, which is skipped (a
# crash dead letter) after crash_limit of them
def test_a_search_kafka_could_not_answer_is_no_crash_of_the_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # K's records at 2@3 and 2@4 landed after the fence end (3) and before the drain marker
    # (2@5): on time in 2, processed by every replay. The processor meets 2@4, the first record
    # past the fence end, and searches in[2] for the drain marker; the broker does not answer
    # in time (a leader election, a slow broker): the processor exits and is restarted, into
    # the same search, crash_limit times
    world = World(tmp_path)
    history = fenced(world)
    world.put(2, K, 4)  # 2@3
    world.run(steps=100)  # processed up to 2@3: the next run starts reading past it
    on_time = world.put(2, K, 4)  # 2@4
    drain = put_drain_marker(world, 2, step=2)  # 2@5
    three = put_drain_marker(world, 3, step=2)  # 3@1
    searches = [0]

    def unanswered(*_at: Any) -> int | None:
        searches[0] += 1
        raise KafkaIOError("in [2]: timed out waiting for the list offsets reply")

    monkeypatch.setattr("framework.runtime.loop.find_marker", unanswered)
    exits = 0
    for _run in range(8):  # the supervisor restarts it
        try:
            world.run(steps=100)
        except KafkaIOError:
            exits += 1
            continue
        break
    monkeypatch.undo()  # Kafka answers again; `expand` records the drains
    world.record(history.with_drains({2: drain, 3: three}))
    world.run(steps=100)
    letters = world.dead_letters()
    assert exits >= 1 and searches[0] >= 1
    assert (2, on_time) not in letters, (
        f"after {exits} exits on a search Kafka did not answer, {K!r}'s on-time record at "
        f"2@{on_time} is a dead letter: {letters[(2, on_time)]!r}"
    )


# fixed: review-fold2 finding 8: every run searches each fenced partition (a consumer, a scan
# from the fence end, up to 60 s, inside a batch), also one that read it from before its fence
# end and so meets its markers in order
def test_a_run_that_reads_on_through_the_fence_end_searches_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = World(tmp_path)
    history = fenced(world)
    world.put(2, K, 4)  # 2@3
    world.put(2, K, 4)  # 2@4, the first record past the fence end
    drain = put_drain_marker(world, 2, step=2)
    three = put_drain_marker(world, 3, step=2)
    searched: list[tuple[Any, ...]] = []

    def counted(*at: Any) -> int | None:
        searched.append(at)
        return None

    monkeypatch.setattr("framework.runtime.loop.find_marker", counted)
    world.run(steps=100)  # one run, from offset 0 of every partition
    world.record(history.with_drains({2: drain, 3: three}))
    assert searched == [], f"a run that read in[2] from 0 searched it: {searched}"


def test_control_the_on_time_record_is_processed_when_the_search_works(tmp_path: Path) -> None:
    world = World(tmp_path)
    history = fenced(world)
    world.put(2, K, 4)
    on_time = world.put(2, K, 4)
    drain = put_drain_marker(world, 2, step=2)
    three = put_drain_marker(world, 3, step=2)
    world.run(steps=100)
    world.record(history.with_drains({2: drain, 3: three}))
    world.run(steps=100)
    assert (2, on_time) not in world.dead_letters()
