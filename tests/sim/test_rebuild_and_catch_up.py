"""A receiver whose state directory is lost while it catches up keys from a child of its own
partition rebuilds that partition first, then catches up: both read the parent partition, and
a handoff completing during the rebuild made the rebuild apply the catch-up's keys a second
time (found by the simulation; its kept plan drifted away when the world changed)."""

from __future__ import annotations

import json

from tests.sim.broker import StoredRecord
from tests.sim.driver import run_schedule
from tests.sim.plan import Operation, Plan
from tests.sim.world import World

#: 2 partitions on 2 processors grow to 4; scaled out to 4 and back in to 2, processor 0
#: gains partition 2 (split from its own partition 0) back from processor 2
PLAN = Plan(
    seed=1,
    partitions=2,
    initial_processors=2,
    keys=6,
    producers=1,
    records=60,
    max_records=1,
    ready_lag=0,
    operations=(
        Operation("expand", 4, 0.5),
        Operation("scale", 4, 0.5),
        Operation("scale", 2, 3.0),
    ),
    chaos_steps=500,
)


def lose_the_receivers_disk_as_the_scale_in_begins(world: World) -> None:
    """Kill processor 0 and lose its state directory when it is first named the receiver of
    partition 2 in the scale back to 2. Its catch-up reads 40 records a step, its loop one
    (as by default a catch-up reads more than a batch): the catch-up would finish before the
    rebuild of partition 0 passed partition 2's threshold."""
    world.app.config.scaling.catchup_batch = 40
    struck: list[bool] = []

    def watch(record: StoredRecord) -> None:
        if struck or record.topic != world.app.config.control_topic or record.value is None:
            return
        fact = json.loads(record.value)
        if fact.get("type") == "handoff" and fact.get("target") == 0 and fact.get("source") == 2:
            struck.append(True)
            world.kill_processor(0, True, "(test: the receiver's disk is lost)")

    world.broker.watchers.append(watch)


def test_a_receiver_rebuilding_its_own_partition_catches_up_its_child_after() -> None:
    outcome = run_schedule(PLAN, aim=lose_the_receivers_disk_as_the_scale_in_begins)
    assert any("state directory" in kill for kill in outcome.events), outcome.report()
    assert not outcome.problems, outcome.report()
