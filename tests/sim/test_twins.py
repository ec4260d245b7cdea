"""Two runs of one processor id at once (a mistaken second pod, its own disk) during a scale:
only the newest run's facts count, the older one stops, and a directory that missed a
handoff another run completed is cleared before it rebuilds (issue 32, item 1; the
reproductions in ``shared/repro/defects/exp1*``). Real runtime on the in-memory Kafka."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from framework import App
from framework.coordination.scaling import request_scale
from framework.processing import ProcessorReplacedError
from framework.runtime.loop import ProcessorRuntime
from rebalance import bucket, key_hash
from statestore import processor_path
from tests.sim.app import INPUT, OUTPUT, make_app
from tests.sim.kafka import MemoryKafka
from tests.sim.plan import Plan
from tests.sim.scheduler import Party
from tests.sim.world import World


def _world(tmp_path: Path, seed: int) -> World:
    plan = Plan(
        seed=seed,
        partitions=2,
        initial_processors=1,
        keys=8,
        records=150,
        max_records=5,
        ready_lag=5,
        exactly_once=True,
        chaos_steps=0,
    )
    world = World(plan, tmp_path)
    world.create_topics()
    world.start_processor(0)
    world.start_producer(plan.records)
    return world


def _run_until(world: World, done: Callable[[], bool], limit: int = 200_000) -> bool:
    for _ in range(limit):
        if done():
            return True
        if world.scheduler.step() is None:
            world.scheduler.now += 0.5
    return False


def _handoff_events(world: World, event: str) -> list[tuple[dict[str, Any], str]]:
    part = world.broker.partition((world.app.config.control_topic, 0))
    records = [(orjson.loads(r.value), r.origin) for r in part.records if r.value is not None]
    return [(r, o) for r, o in records if r.get("type") == "handoff" and r["event"] == event]


def _twin(world: World, root: Path) -> tuple[App, Party]:
    """Processor 1 started on "another machine" (its own state directory) as well."""
    plan = world.plan
    app = make_app(
        root,
        partitions=plan.partitions,
        initial_processors=plan.initial_processors,
        max_records=plan.max_records,
        lease_ms=2000,
        ready_lag=plan.ready_lag,
        exactly_once=True,
    )

    def body(port: MemoryKafka, party: Party) -> None:
        ProcessorRuntime(
            app,
            1,
            kafka=port,
            open_database=world.disks.opener(party),
            snapshots=False,
            holds_state=world.disks.holds,
        ).run()

    return app, world.spawn("twin-processor-1", body)


def _wrong_keys(world: World, app: App) -> list[tuple[str, int, Any]]:
    """Processor 1's keys whose state in ``app``'s directory is not the fold of the input."""
    truth: dict[bytes | None, int] = {}
    for record in world.broker.ledger.get(INPUT, []):
        truth[record.key] = truth.get(record.key, 0) + 1
    database = world.disks.read(processor_path(app.config.app_state_dir, 1))
    assert database is not None
    states = dict(database.items("folds"))
    database.close()
    return [
        (key.decode(), n, states.get(key))
        for key, n in sorted((k, n) for k, n in truth.items() if k is not None)
        if bucket(key_hash(key), 1, 2) == 1
        and (states.get(key) is None or states[key]["n"] != n or states[key]["bad"])
    ]


def _wrong_outputs(world: World, origin: Callable[[str], bool]) -> list[Any]:
    """Outputs of input partition 1 written by ``origin`` whose count is not the fold's."""
    expected: dict[tuple[int, int], int] = {}
    seen: dict[bytes | None, int] = {}
    for record in world.broker.ledger.get(INPUT, []):
        seen[record.key] = seen.get(record.key, 0) + 1
        expected[(record.partition, record.offset)] = seen[record.key]
    outputs = [
        [*json.loads(r.value), r.origin]
        for r in world.broker.ledger.get(OUTPUT, [])
        if r.value is not None
    ]
    mine = [o for o in outputs if o[4] == 1 and origin(o[-1])]
    assert mine, "no output of partition 1 from that run"
    return [o for o in mine if o[2] != expected[(o[4], o[5])]]


def test_a_second_run_of_a_receiver_neither_completes_for_it_nor_corrupts_its_state(
    tmp_path: Path,
) -> None:
    """Run A of processor 1 catches up; run B starts later on another disk. A's COMPLETE is
    ignored (B is the newest), A stops, and B's state and outputs are the input's fold (on
    main B took A's COMPLETE, dropped its catch-up and replayed the partition on top of it:
    every output it emitted after was wrong)."""
    world = _world(tmp_path / "world", seed=5)
    _run_until(world, lambda: world.scheduler.now > 8.0)
    request_scale(world.app, 2, kafka=world.driver)
    world.start_processor(1)
    first = world.processors[1]
    assert _run_until(world, lambda: bool(_handoff_events(world, "START_CATCH_UP")))
    _run_until(world, lambda: False, limit=20)  # A applies a few records
    twin_app, twin = _twin(world, tmp_path / "twin")
    assert _run_until(world, lambda: bool(_handoff_events(world, "COMPLETE")))
    _run_until(world, lambda: not any(p.runnable for p in world.producers))
    _run_until(world, lambda: False, limit=30_000)
    try:
        assert isinstance(first.error, ProcessorReplacedError), first.error
        assert twin.runnable and twin.error is None, twin.error
        completes = _handoff_events(world, "COMPLETE")
        assert [origin.startswith("twin") for _r, origin in completes][-1]
        assert _wrong_keys(world, twin_app) == []
        assert _wrong_outputs(world, lambda origin: origin.startswith("twin")) == []
    finally:
        world.scheduler.end()


def test_a_directory_that_missed_a_handoff_another_run_completed_is_rebuilt_from_empty(
    tmp_path: Path,
) -> None:
    """Run B of processor 1 completes the handoff; A's directory holds half a catch-up. The
    operator stops B and starts processor 1 on A's machine again: it clears what its
    directory held of the gained keys and rebuilds them, so its outputs are exact (on main
    it replayed the partition on top of its half catch-up)."""
    world = _world(tmp_path / "world", seed=3)
    _run_until(world, lambda: world.scheduler.now > 8.0)
    request_scale(world.app, 2, kafka=world.driver)
    world.start_processor(1)
    assert _run_until(world, lambda: bool(_handoff_events(world, "START_CATCH_UP")))
    _twin_app, twin = _twin(world, tmp_path / "twin")
    assert _run_until(world, lambda: bool(_handoff_events(world, "COMPLETE")))
    assert _handoff_events(world, "COMPLETE")[-1][1].startswith("twin")
    _run_until(world, lambda: not any(p.runnable for p in world.producers))
    _run_until(world, lambda: False, limit=30_000)
    world.scheduler.kill(twin)
    world.start_processor(1)  # on A's machine: the world's own state directory
    again = world.processors[1]
    origin = f"processor-1#{world._processes}"
    world.start_producer(40)
    try:
        _run_until(world, lambda: not any(p.runnable for p in world.producers))
        _run_until(world, lambda: False, limit=30_000)
        assert again.runnable and again.error is None, again.error
        assert _wrong_keys(world, world.app) == []
        assert _wrong_outputs(world, lambda o: o == origin) == []
    finally:
        world.scheduler.end()
