"""A receiver whose catch-up stopped (a failed Spark job, say) and that is then restarted and
catches up again ends its stop with a ``resumed`` record, so that its source releases: its
handoff was READY already, so no handoff event of the new run would end the stop, and the
scale could only be aborted (helper-3's review of the refused-RELEASE fix)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from unittest import mock

import pytest

from framework.processing import ProcessorStoppedError
from framework.runtime.catchup import CatchUp
from rebalance import HandoffPhase
from tests.sim.broker import StoredRecord
from tests.sim.driver import run_schedule
from tests.sim.plan import Operation, Plan
from tests.sim.world import World

#: 1 processor on 2 partitions scaled out to 2: processor 1 gains partition 1
PLAN = Plan(
    seed=3,
    partitions=2,
    initial_processors=1,
    keys=6,
    producers=1,
    records=40,
    max_records=3,
    ready_lag=0,
    operations=(Operation("scale", 2, 0.5),),
    chaos_steps=500,
)


@pytest.fixture
def stop_once_when_ready() -> Iterator[list[World]]:
    """The receiver's first catch-up step after its handoff became READY fails as a Spark
    job would; its stop is noted in the control log, and the processor is restarted 1 s
    later (the fix applied)."""
    worlds: list[World] = []
    step = CatchUp.step
    stopped: list[bool] = []

    def failing_step(self: CatchUp, limit: int) -> None:
        scale = worlds[0].control().scaling if worlds else None
        ready = scale is not None and scale.handoffs[(0, 1)].phase is HandoffPhase.READY
        if ready and not stopped:
            stopped.append(True)
            raise ProcessorStoppedError("simulated: the Spark job that builds its keys failed")
        step(self, limit)

    with mock.patch.object(CatchUp, "step", failing_step):
        yield worlds


def restart_after_its_stop(world: World, worlds: list[World]) -> None:
    worlds.append(world)

    def watch(record: StoredRecord) -> None:
        if record.topic != world.app.config.control_topic or record.value is None:
            return
        if json.loads(record.value).get("type") == "stopped":
            world.kills_due.append((world.clock.monotonic() + 1.0, 1))

    world.broker.watchers.append(watch)


def test_a_restarted_receiver_that_caught_up_again_lets_its_source_release(
    stop_once_when_ready: list[World],
) -> None:
    worlds = stop_once_when_ready
    outcome = run_schedule(PLAN, aim=lambda world: restart_after_its_stop(world, worlds))
    assert not outcome.problems, outcome.report()
    state = worlds[0].replay_control()
    assert state.scale is not None and state.scale.aborted is None, outcome.report()
    assert state.generation is not None and state.generation.processors == 2, outcome.report()
    kinds = [
        json.loads(r.value)["type"]
        for r in worlds[0].broker.partition((worlds[0].app.config.control_topic, 0)).records
        if r.value is not None
    ]
    assert kinds.index("stopped") < kinds.index("resumed"), kinds
