"""A receiver that stopped catching up can be fixed and restarted (issue 32, item 3): it
resumes by itself once past the record it stopped at, or, when the whole processor stopped,
the operator resumes it (``splitstate scale --resume``), refused while unsafe. Real runtime
on the in-memory Kafka."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import pytest

from framework import App, KeyState, Output, Record
from framework.config import ConfigError
from framework.coordination import scaling
from framework.coordination.control_log import ControlLog
from framework.coordination.scaling import abort_scale, request_scale, resume_scale
from framework.kafka import ConsumerFailedError, Message
from framework.runtime.loop import ProcessorRuntime
from framework.runtime.run_voice import RunVoice
from rebalance import HandoffEvent, HandoffPhase
from rebalance.control import handoff_record
from rebalance.control_records import instance_record
from rebalance.control_stops import Stop, stopped_record
from statestore import processor_path
from statestore.layout import CRASH_CATCHUP_ATTEMPT_PREFIX, META_STORE
from tests.sim.app import INPUT, FoldState, fold, make_app, parse
from tests.sim.consumer import MemoryConsumer
from tests.sim.kafka import MemoryKafka
from tests.sim.plan import Plan
from tests.sim.scheduler import Party
from tests.sim.world import World


def _world(tmp_path: Path, ready_lag: int = 5) -> World:
    plan = Plan(
        seed=11,
        partitions=2,
        initial_processors=1,
        keys=4,
        records=40,
        max_records=3,
        ready_lag=ready_lag,
        chaos_steps=0,
    )
    world = World(plan, tmp_path)
    world.create_topics()
    world.start_processor(0)
    world.start_producer(plan.records)
    return world


def _buggy_app(world: World, fails_at: tuple[str, int, int]) -> App:
    """The fold app with ``on_error: stop``, whose function fails on record ``fails_at``."""
    plan = world.plan
    app = make_app(
        world.app.config.app_state_dir,
        partitions=plan.partitions,
        initial_processors=plan.initial_processors,
        max_records=plan.max_records,
        lease_ms=2000,
        ready_lag=plan.ready_lag,
    )
    buggy = App(app.config.model_copy(update={"on_error": "stop"}))
    buggy.store("folds")

    @buggy.processor()
    def apply(record: Record[bytes | None], state: KeyState[FoldState]) -> Output:
        if (record.topic, record.partition, record.offset) == fails_at:
            raise RuntimeError("a bug in this version of the function")
        producer, seq, _kind = parse((record.value or b"").decode())
        new = fold(state.get(), producer, seq)
        state.set(new)
        return Output([producer, seq, new["n"], record.topic, record.partition, record.offset])

    return buggy


def _spawn(world: World, app: App, processor: int) -> Party:
    def body(port: MemoryKafka, party: Party) -> None:
        ProcessorRuntime(
            app,
            processor,
            kafka=port,
            open_database=world.disks.opener(party),
            snapshots=False,
            holds_state=world.disks.holds,
            discard=world.disks.lose,
        ).run()

    return world.spawn(f"processor-{processor}", body)


def _phase(world: World) -> HandoffPhase | None:
    scale = world.control().scale
    return None if scale is None else scale.handoffs[(0, 1)].phase


def _stopped_while_ready(world: World) -> tuple[tuple[str, int, int], Party]:
    """Processor 0 processed every record; the scale 1 -> 2 starts while it is down, and
    processor 1 (a version whose function fails on a record near the end of partition 1)
    reaches READY, then stops at that record. Returns the record, and that run."""
    world.scheduler.run_until(lambda: not any(p.runnable for p in world.producers))
    end = world.broker.end_offset(INPUT, 1)
    assert world.scheduler.run_until(
        lambda: (
            (world.disks.read(processor_path(world.app.config.app_state_dir, 0)) or _Empty())
            .offsets()
            .get((INPUT, 1), 0)
            >= end
        ),
    )
    world.scheduler.run_until(lambda: False, limit=2000)  # its group commits land
    world.scheduler.kill(world.processors[0])
    request_scale(world.app, 2, kafka=world.driver)
    fails_at = (INPUT, 1, end - 2)  # within ready_lag of T1: READY is written before it
    buggy = _spawn(world, _buggy_app(world, fails_at), 1)
    assert world.scheduler.run_until(lambda: bool(_stops(world)))
    assert _phase(world) is HandoffPhase.READY
    return fails_at, buggy


class _Empty:
    def offsets(self) -> dict[tuple[str, int], int]:
        return {}


def _stops(world: World) -> dict[int, object]:
    scale = world.control().scaling
    return {} if scale is None else dict(scale.stopped)


def test_a_receiver_stopped_at_a_record_resumes_once_fixed_and_restarted(tmp_path: Path) -> None:
    """On main the restarted receiver wrote no event (its handoff was READY already), so the
    stop stayed, the source held its release, and only an abort ended the scale."""
    world = _world(tmp_path)
    try:
        fails_at, buggy = _stopped_while_ready(world)
        stop = world.control().scaling.stopped[1]  # type: ignore[union-attr]
        assert stop.at == fails_at
        world.start_processor(0)  # the source is back: it holds its release meanwhile
        world.scheduler.run_until(lambda: False, limit=3000)
        assert _phase(world) is HandoffPhase.READY and _stops(world)
        world.scheduler.kill(buggy)  # the fix: the usual function
        world.start_processor(1)
        assert world.scheduler.run_until(lambda: world.control().scaling is None), _stops(world)
        assert world.control().processors == 2
    finally:
        world.scheduler.end()


def test_resume_is_refused_until_the_stopped_receiver_was_restarted(tmp_path: Path) -> None:
    world = _world(tmp_path)
    try:
        _fails_at, buggy = _stopped_while_ready(world)
        with pytest.raises(ConfigError, match="has not been restarted since"):
            resume_scale(world.app, kafka=world.driver, now=world.clock.time())
        world.scheduler.kill(buggy)
        world.start_processor(1)  # fixed: it gets past the record and resumes by itself
        world.start_processor(0)
        assert world.scheduler.run_until(lambda: world.control().scaling is None), _stops(world)
        with pytest.raises(ConfigError, match="no scale in progress"):
            resume_scale(world.app, kafka=world.driver, now=world.clock.time())
    finally:
        world.scheduler.end()


def test_an_ended_catch_ups_bookkeeping_is_deleted(tmp_path: Path) -> None:
    """A receiver killed inside its function during a catch-up leaves the attempt's record
    (``crash/attempt/catchup-<g>``); once the scale ended (here: aborted) it is deleted, with
    the catch-up's progress (on main they stayed for good)."""
    world = _world(tmp_path, ready_lag=0)
    try:
        assert world.scheduler.run_until(lambda: not any(p.runnable for p in world.producers))
        request_scale(world.app, 2, kafka=world.driver)
        world.start_processor(1)
        assert world.scheduler.run_until(lambda: world.control().scaling is None)
        request_scale(world.app, 1, kafka=world.driver)  # processor 0 receives
        path = processor_path(world.app.config.app_state_dir, 0)
        scope = "catchup-2"

        def catching_up() -> bool:
            database = world.disks.read(path)
            return database is not None and bool(database.progress(scope))

        assert world.scheduler.run_until(catching_up)
        world.scheduler.kill(world.processors[0])
        left = world.disks.read(path)
        assert left is not None
        attempt = CRASH_CATCHUP_ATTEMPT_PREFIX + scope.encode()
        left.backend.write({META_STORE: [(attempt, b'{"ranges": [["sim-in", 1, 0, 2, 0]]}')]})
        abort_scale(world.app, "a test", kafka=world.driver)
        world.start_processor(0)
        world.scheduler.run_until(lambda: False, limit=3000)
        after = world.disks.read(path)
        assert after is not None
        assert after.backend.get(META_STORE, attempt) is None
        assert after.progress(scope) == {}
    finally:
        world.scheduler.end()


def test_a_failed_catch_up_consumer_stops_the_catch_up_and_the_operator_resumes_it(
    tmp_path: Path,
) -> None:
    """A fatal consumer error in the catch-up stops the catch-up only (on main it ended the
    whole processor); it is a stop of the whole processor's catch-up, so the restarted
    receiver does not resume by itself, and ``scale --resume`` does once it was restarted."""
    world = _world(tmp_path)
    original = MemoryConsumer.consume
    failures = [1]

    def consume(self: MemoryConsumer, max_records: int, timeout: float) -> list[Message]:
        if self._name == "catch-up consumer" and failures:
            failures.pop()
            raise ConsumerFailedError("Kafka consumer failed: _FATAL (a test)")
        return original(self, max_records, timeout)

    try:
        world.scheduler.run_until(lambda: not any(p.runnable for p in world.producers))
        request_scale(world.app, 2, kafka=world.driver)
        with mock.patch.object(MemoryConsumer, "consume", consume):
            world.start_processor(1)
            assert world.scheduler.run_until(lambda: bool(_stops(world)))
            world.scheduler.run_until(lambda: False, limit=500)
        receiver = world.processors[1]
        assert receiver.runnable and receiver.error is None, receiver.error
        stop = world.control().scaling.stopped[1]  # type: ignore[union-attr]
        assert stop.at is None and "cannot read on" in stop.reason
        with pytest.raises(ConfigError, match="has not been restarted since"):
            resume_scale(world.app, kafka=world.driver, now=world.clock.time())
        world.scheduler.kill(receiver)
        world.start_processor(1)
        world.scheduler.run_until(lambda: False, limit=5000)
        assert _stops(world), "a whole-processor stop must wait for the operator"
        assert resume_scale(world.app, kafka=world.driver, now=world.clock.time()) == [1]
        assert world.scheduler.run_until(lambda: world.control().scaling is None), _stops(world)
        assert world.control().processors == 2
    finally:
        world.scheduler.end()


def test_resume_ends_only_the_stop_it_checked(tmp_path: Path) -> None:
    """The restarted receiver stops again between ``--resume``'s read and its append: the
    resume names the stop it checked, so the new stop stays and the source keeps holding
    its release (review finding: the resume ended the unchecked stop and the source
    released to a stopped receiver)."""
    world = _world(tmp_path)
    try:
        world.scheduler.run_until(lambda: False, limit=2000)
        request_scale(world.app, 2, kafka=world.driver)
        world.scheduler.run_until(lambda: False, limit=200)
        log = ControlLog(world.driver, world.app.config.control_topic)
        scale = log.read().scaling
        assert scale is not None
        g = scale.generation
        # processor 1 (its records by hand) caught up, stopped as a whole, was restarted
        log.append(
            instance_record(1, "i1"),
            handoff_record(g, 0, 1, HandoffEvent.START_CATCH_UP, instance="i1"),
            handoff_record(g, 0, 1, HandoffEvent.CAUGHT_UP, instance="i1"),
            stopped_record(g, 1, "history lost", at=None, instance="i1"),
            instance_record(1, "i2"),
        )

        def racing_reports(_kafka: object, _topic: str) -> dict[int, object]:
            # the restarted run fails again right now (the cause was not fixed)
            log.append(stopped_record(g, 1, "history lost again", at=None, instance="i2"))
            return {}

        with (
            mock.patch.object(scaling, "read_reports", racing_reports),
            pytest.raises(ConfigError, match="still stopped"),
        ):
            resume_scale(world.app, kafka=world.driver, now=world.clock.time())
        state = log.read()
        assert state.scaling is not None and state.scaling.stopped[1].instance == "i2"
        assert "an earlier stop" in state.ignored[-1]
        world.scheduler.run_until(lambda: False, limit=3000)
        assert _phase(world) is HandoffPhase.READY  # no release to a stopped receiver
        abort_scale(world.app, "give up", kafka=world.driver)  # still possible
    finally:
        world.scheduler.end()


def test_a_stop_of_its_own_processing_is_past_once_its_state_is() -> None:
    """A receiver stopped by a record of its own partition (its processing, not its
    catch-up) is past it once its state's offset is, though its catch-up reads that
    partition only up to a growth threshold as an ancestor (review finding)."""
    threshold, failing, state_offset = 40, 120, 150
    database = SimpleNamespace(offsets=lambda: {("in", 0): state_offset})
    voice = SimpleNamespace(_database=database)
    catchup = SimpleNamespace(positions={("in", 0): threshold, ("in", 2): 30})
    live = Stop("the function failed", ("in", 0, failing), "run-1", during="processing")
    assert RunVoice._past(voice, live, catchup)  # type: ignore[arg-type]
    caught = Stop("the function failed", ("in", 0, 45), "run-1", during="catch-up")
    assert not RunVoice._past(voice, caught, catchup)  # type: ignore[arg-type]
