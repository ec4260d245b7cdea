"""Two runs of one processor id at once (a mistaken second pod, its own disk) during a scale:
only the newest run's facts count, the older one stops, and a directory that missed a
handoff another run completed is cleared before it rebuilds (issue 32, item 1; the
reproductions in ``shared/repro/defects/exp1*``). Real runtime on the in-memory Kafka."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import orjson

from framework import App
from framework.coordination.control_log import ControlWatcher
from framework.coordination.scaling import request_scale
from framework.processing import ProcessorReplacedError
from framework.runtime.loop import ProcessorRuntime
from rebalance import bucket, key_hash
from statestore import processor_path
from tests.sim.app import INPUT, OUTPUT, make_app
from tests.sim.kafka import MemoryKafka
from tests.sim.operators import start_operator
from tests.sim.plan import Operation, Plan
from tests.sim.scheduler import Party
from tests.sim.world import World


def _world(
    tmp_path: Path,
    seed: int,
    *,
    keys: int = 8,
    records: int = 150,
    exactly_once: bool = True,
    snapshots: bool = False,
) -> World:
    plan = Plan(
        seed=seed,
        partitions=2,
        initial_processors=1,
        keys=keys,
        records=records,
        max_records=5,
        ready_lag=5,
        exactly_once=exactly_once,
        snapshots=snapshots,
        chaos_steps=0,
    )
    world = World(plan, tmp_path)
    world.create_topics()
    world.start_processor(0)
    world.start_producer(plan.records)
    return world


def _handoff_events(
    world: World, event: str, generation: int = 1
) -> list[tuple[dict[str, Any], str]]:
    part = world.broker.partition((world.app.config.control_topic, 0))
    records = [(orjson.loads(r.value), r.origin) for r in part.records if r.value is not None]
    return [
        (r, o)
        for r, o in records
        if r.get("type") == "handoff" and r["event"] == event and r["generation"] == generation
    ]


def _twin(world: World, root: Path, processor: int = 1) -> tuple[App, Party]:
    """Processor ``processor`` started on "another machine" (its own state directory) as
    well, with the world's guarantee and snapshots (in the same snapshot store)."""
    plan = world.plan
    app = make_app(
        root,
        partitions=plan.partitions,
        initial_processors=plan.initial_processors,
        max_records=plan.max_records,
        lease_ms=2000,
        ready_lag=plan.ready_lag,
        exactly_once=plan.exactly_once,
        snapshots=plan.snapshots,
    )
    shared = app.config.snapshots.model_copy(update={"url": world.app.config.snapshot_url})
    app.configure(app.config.model_copy(update={"snapshots": shared}))

    def body(port: MemoryKafka, party: Party) -> None:
        ProcessorRuntime(
            app,
            processor,
            kafka=port,
            open_database=world.disks.opener(party),
            snapshots=plan.snapshots,
            holds_state=world.disks.holds,
            discard=world.disks.lose,
        ).run()

    return app, world.spawn(f"twin-processor-{processor}", body)


def _wrong_keys(
    world: World, app: App, processor: int = 1, processors: int = 2
) -> list[tuple[str, int, Any]]:
    """Processor ``processor``'s keys (of ``processors``) whose state in ``app``'s directory
    is not the fold of the input."""
    truth: dict[bytes | None, int] = {}
    for record in world.broker.ledger.get(INPUT, []):
        truth[record.key] = truth.get(record.key, 0) + 1
    database = world.disks.read(processor_path(app.config.app_state_dir, processor))
    assert database is not None
    states = dict(database.items("folds"))
    database.close()
    return [
        (key.decode(), n, states.get(key))
        for key, n in sorted((k, n) for k, n in truth.items() if k is not None)
        if bucket(key_hash(key), 1, processors) == processor
        and (states.get(key) is None or states[key]["n"] != n or states[key]["bad"])
    ]


def _wrong_outputs(world: World, origin: Callable[[str], bool], partition: int = 1) -> list[Any]:
    """Outputs of input ``partition`` written by ``origin`` whose count is not the fold's."""
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
    mine = [o for o in outputs if o[4] == partition and origin(o[-1])]
    assert mine, f"no output of partition {partition} from that run"
    return [o for o in mine if o[2] != expected[(o[4], o[5])]]


def _restart_on_the_first_machine(world: World) -> None:
    """Start processor 1 on its first machine (the world's own state directory), write 40
    more records, and check it runs with exact state and outputs."""
    world.start_processor(1)
    again = world.processors[1]
    origin = f"processor-1#{world._processes}"
    world.start_producer(40)
    try:
        world.scheduler.run_until(lambda: not any(p.runnable for p in world.producers))
        world.scheduler.run_until(lambda: False, limit=30_000)
        assert again.runnable and again.error is None, again.error
        assert _wrong_keys(world, world.app) == []
        assert _wrong_outputs(world, lambda o: o == origin) == []
    finally:
        world.scheduler.end()


def test_a_second_run_of_a_receiver_neither_completes_for_it_nor_corrupts_its_state(
    tmp_path: Path,
) -> None:
    """Run A of processor 1 catches up; run B starts later on another disk. A's COMPLETE is
    ignored (B is the newest), A stops, and B's state and outputs are the input's fold (on
    main B took A's COMPLETE, dropped its catch-up and replayed the partition on top of it:
    every output it emitted after was wrong)."""
    world = _world(tmp_path / "world", seed=5)
    world.scheduler.run_until(lambda: world.scheduler.now > 8.0)
    request_scale(world.app, 2, kafka=world.driver)
    world.start_processor(1)
    first = world.processors[1]
    assert world.scheduler.run_until(lambda: bool(_handoff_events(world, "START_CATCH_UP")))
    world.scheduler.run_until(lambda: False, limit=20)  # A applies a few records
    twin_app, twin = _twin(world, tmp_path / "twin")
    assert world.scheduler.run_until(lambda: bool(_handoff_events(world, "COMPLETE")))
    world.scheduler.run_until(lambda: not any(p.runnable for p in world.producers))
    world.scheduler.run_until(lambda: False, limit=30_000)
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
    world.scheduler.run_until(lambda: world.scheduler.now > 8.0)
    request_scale(world.app, 2, kafka=world.driver)
    world.start_processor(1)
    assert world.scheduler.run_until(lambda: bool(_handoff_events(world, "START_CATCH_UP")))
    _twin_app, twin = _twin(world, tmp_path / "twin")
    assert world.scheduler.run_until(lambda: bool(_handoff_events(world, "COMPLETE")))
    assert _handoff_events(world, "COMPLETE")[-1][1].startswith("twin")
    world.scheduler.run_until(lambda: not any(p.runnable for p in world.producers))
    world.scheduler.run_until(lambda: False, limit=30_000)
    world.scheduler.kill(twin)
    _restart_on_the_first_machine(world)  # the world's own state directory


def test_a_stale_directory_of_a_scale_in_receiver_after_a_growth_is_rebuilt_whole(
    tmp_path: Path,
) -> None:
    """Input 2 -> 3 partitions (2 split from 0), scale 1 -> 3, then 3 -> 2: processor 0
    gets partition 2 back, its gained keys' earlier records lying in its own partition 0.
    A twin of processor 0 completes that handoff; processor 0 restarts on its own disk.
    Its directory is replaced and rebuilt whole, so those keys are exact (review finding:
    clearing the gained keys alone lost their records in partition 0 below the threshold,
    which nothing read again)."""
    world = _world(tmp_path / "world", seed=7, keys=12, records=120)
    world.scheduler.run_until(lambda: world.scheduler.now > 6.0)
    start_operator(world, (Operation("expand", 3),))
    assert world.scheduler.run_until(
        lambda: not any(o.runnable for o in world.operators) and world.control().growth is None,
    )
    world.scheduler.run_until(lambda: not any(p.runnable for p in world.producers))
    request_scale(world.app, 3, kafka=world.driver)
    world.start_processor(1)
    world.start_processor(2)
    world.start_producer(60)
    assert world.scheduler.run_until(lambda: world.control().processors == 3)
    world.scheduler.run_until(lambda: not any(p.runnable for p in world.producers))
    request_scale(world.app, 2, kafka=world.driver)  # 2 -> 0: partition 2
    world.start_producer(60)
    assert world.scheduler.run_until(lambda: bool(_handoff_events(world, "START_CATCH_UP", 2)))
    twin_app, twin = _twin(world, tmp_path / "twin", processor=0)
    assert world.scheduler.run_until(lambda: bool(_handoff_events(world, "COMPLETE", 2)))
    assert _handoff_events(world, "COMPLETE", 2)[-1][1].startswith("twin")
    world.scheduler.run_until(lambda: not any(p.runnable for p in world.producers))
    world.scheduler.run_until(lambda: False, limit=30_000)
    try:
        assert _wrong_keys(world, twin_app, processor=0) == []
        world.scheduler.kill(twin)
        world.start_processor(0)
        origin = f"processor-0#{world._processes}"
        world.start_producer(30)
        world.scheduler.run_until(lambda: not any(p.runnable for p in world.producers))
        world.scheduler.run_until(lambda: False, limit=40_000)
        assert world.processors[0].error is None, world.processors[0].error
        assert _wrong_keys(world, world.app, processor=0) == []
        assert _wrong_outputs(world, lambda o: o == origin, partition=2) == []
    finally:
        world.scheduler.end()


def test_a_stale_directory_is_restored_from_the_snapshot_the_other_run_took(
    tmp_path: Path,
) -> None:
    """With snapshots on and the moved partition's first records deleted by retention, the
    stale directory is replaced by the processor's newest snapshot (taken by the run that
    completed the handoff), not rebuilt from records Kafka no longer has (review finding:
    the rebuild from offset 0 was refused and the processor stopped for good)."""
    world = _world(tmp_path / "world", seed=3, snapshots=True)
    world.scheduler.run_until(lambda: world.scheduler.now > 8.0)
    request_scale(world.app, 2, kafka=world.driver)
    world.start_processor(1)
    assert world.scheduler.run_until(lambda: bool(_handoff_events(world, "START_CATCH_UP")))
    _twin_app, twin = _twin(world, tmp_path / "twin")
    assert world.scheduler.run_until(lambda: world.control().scaling is None)
    assert _handoff_events(world, "COMPLETE")[-1][1].startswith("twin")
    world.scheduler.run_until(lambda: not any(p.runnable for p in world.producers))
    world.scheduler.run_until(lambda: False, limit=30_000)
    world.scheduler.kill(twin)
    committed = world.broker.groups[world.app.config.app_id][(INPUT, 1)]
    world.broker.delete_before(INPUT, 1, committed // 2)  # a processed prefix
    _restart_on_the_first_machine(world)


def test_an_at_least_once_source_twin_that_commits_late_leaves_the_scale_finishing(
    tmp_path: Path,
) -> None:
    """Under at-least-once the older run of the source keeps committing until it reads the
    newer run's instance (here it reads the control log 1 s late); the group's offset the
    receiver rebuilt to can then be above the F the newer run releases at. The receiver
    takes over where it rebuilt to (those records' outputs were emitted), so the scale
    finishes with exact state (review finding: it stopped with "T2 > F" after the release,
    and the scale could neither finish nor be aborted)."""
    world = _world(tmp_path, seed=4, records=400, exactly_once=False)
    world.scheduler.run_until(lambda: world.produced > 150)
    request_scale(world.app, 2, kafka=world.driver)
    world.start_processor(1)
    assert world.scheduler.run_until(lambda: bool(_handoff_events(world, "START_CATCH_UP")))
    world.scheduler.run_until(lambda: False, limit=28)
    older = world.processors[0]
    until = world.clock.monotonic() + 1.0
    real_poll = ControlWatcher.poll

    def poll(self: ControlWatcher, timeout: float = 0.0) -> bool:
        if world.scheduler.current is older and world.clock.monotonic() < until:
            return False
        return real_poll(self, timeout)

    for _ in range(4):  # live traffic while the twin starts
        world.start_producer(200)
    _twin(world, tmp_path / "twin", processor=0)
    try:
        with (
            mock.patch.object(ControlWatcher, "poll", poll),
            mock.patch("framework.runtime.catchup._REFRESH_SECONDS", 0.0),
        ):
            finished = world.scheduler.run_until(
                lambda: world.control().scaling is None, limit=150_000
            )
        assert finished, world.control().scaling
        world.scheduler.run_until(lambda: not any(p.runnable for p in world.producers))
        world.scheduler.run_until(lambda: False, limit=30_000)
        assert _wrong_keys(world, world.app) == []
    finally:
        world.scheduler.end()
