"""Running one schedule: chaos, then settling, then the checks; and shrinking a failure.

``run_schedule(plan, root)`` builds the world of ``plan``, starts its processors, producers
and operator, and steps the scheduler. During the chaos phase it kills processors and
producers (between any two of their broker calls), loses disks, compacts the coordination
logs and fails broker calls at the plan's rates. Then the faults stop, killed producers
are not replaced, and the world must settle within a bounded number of steps: every scale
and growth ended, every input record processed (liveness). The checks then run on the
settled world.
"""

from __future__ import annotations

import contextlib
import logging
import random
import shutil
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

from framework.coordination.registry import TopicRegistry
from framework.kafka import KafkaIOError
from tests.sim.adversary import (
    compact,
    delete_processed,
    kill_at_protocol_steps,
    kill_due,
    watch_counts,
)
from tests.sim.aimed import aim_at_protocol_windows
from tests.sim.aimed_changes import aim_at_changes
from tests.sim.app import INPUT
from tests.sim.checks import check_outputs, check_world
from tests.sim.disks import memory_backed_temp, rocksdb_without_background_compactions
from tests.sim.junk import Junk
from tests.sim.operators import start_operator
from tests.sim.plan import Operation, Plan, rival_operations
from tests.sim.ticker import start_time
from tests.sim.time_checks import check_time
from tests.sim.twin import Twin
from tests.sim.upstream import start_upstream
from tests.sim.world import World

__all__ = ["Outcome", "run_schedule", "shrink"]

#: Steps the chaos phase may run past the plan's ``chaos_steps`` while the operator is still
#: at work or a scale is under way.
CHAOS_EXTENSION_STEPS = 20_000
#: How far the clock jumps in a plan with ``days_later`` (more than any lease or timeout,
#: and more than 2^30 ms: a "never" written as a large number of milliseconds runs out).

#: Steps the world gets to settle once the faults stop, at least; and per live party (each
#: step runs one party: a world of many processors needs more steps for the same time).
#: Steps while an operator still works through its plan do not count (each change waits
#: out fences; its retries are bounded), up to ``SETTLE_OPERATOR_FACTOR`` times the budget.
SETTLE_STEPS = 60_000
SETTLE_STEPS_PER_PARTY = 10_000
SETTLE_OPERATOR_FACTOR = 5
#: Simulated seconds between the supervisor's looks at the control state.
SUPERVISE_SECONDS = 0.5
#: How long the world must stay quiet, with no processor (re)started meanwhile, to be
#: settled (longer than a slow reply: a processor may still be starting).
QUIET_SECONDS = 10.0
#: after a processor stopped for the operator: how long (simulated) and how many steps the
#: world runs on, restarting it
AFTER_HALT_SECONDS = 15.0
AFTER_HALT_STEPS = 10_000


@dataclass
class Outcome:
    """How a schedule ended."""

    plan: Plan
    problems: list[str] = field(default_factory=list)
    steps: int = 0
    simulated_seconds: float = 0.0
    events: list[str] = field(default_factory=list)
    #: why a processor stopped for the operator, when one did (the schedule ends there)
    halted: str | None = None

    @property
    def ok(self) -> bool:
        """No invariant broken."""
        return not self.problems

    def report(self) -> str:
        """The plan, what happened, and what broke."""
        lines = [self.plan.describe(), f"ran {self.steps} steps, {self.simulated_seconds:.1f}s"]
        lines += [f"  event: {event}" for event in self.events[:40]]
        if self.halted:
            lines.append(f"  halted: {self.halted[:300]}")
        lines += [f"  PROBLEM: {problem}" for problem in self.problems]
        return "\n".join(lines)


def run_schedule(
    plan: Plan, root: Path | None = None, aim: Callable[[World], None] | None = None
) -> Outcome:
    """Run ``plan``'s schedule; the outcome lists every broken invariant. ``aim`` is called
    with the world before it starts (a test's own fault, aimed at one window)."""
    owned = root is None
    scratch = memory_backed_temp()
    if root is None:
        root = Path(tempfile.mkdtemp(prefix="splitstate-sim-", dir=scratch))
    logging.disable(logging.CRITICAL)  # the runtime's warnings and errors are expected under faults
    ids = random.Random(plan.seed * 7 + 4)  # request ids, record keys, group names

    def seeded_uuid4() -> uuid.UUID:
        return uuid.UUID(int=ids.getrandbits(128), version=4)

    try:
        with (
            mock.patch("uuid.uuid4", seeded_uuid4),
            mock.patch("tempfile.tempdir", scratch or tempfile.gettempdir()),
            rocksdb_without_background_compactions(),
        ):
            return _run(plan, root, aim)
    finally:
        logging.disable(logging.NOTSET)
        if owned:
            shutil.rmtree(root, ignore_errors=True)


def _run(plan: Plan, root: Path, aim: Callable[[World], None] | None) -> Outcome:
    world = World(plan, root)
    if aim is not None:
        aim(world)
    outcome = Outcome(plan)
    scheduler = world.scheduler
    try:
        world.create_topics()
        for processor in range(plan.initial_processors):
            world.start_processor(processor)
        for _ in range(plan.producers):
            world.start_producer(plan.records)
        if plan.upstream:
            start_upstream(world, plan.records)
        if plan.timed:
            start_time(world)
        start_operator(world, plan.operations)
        if plan.rival:
            start_operator(world, rival_operations(plan), name="rival")
        kill_at_protocol_steps(world)
        watch_counts(world)
        aim_at_protocol_windows(world)
        aim_at_changes(world)
        twin = Twin(world)
        junk = Junk(world)
        _chaos(world, plan, twin, junk)
        twin.stop()  # the operator stops one of two instances before the end at the latest
        junk.fix()  # the operator drops a record no reader can read by then at the latest
        world.chaos.active = False
        world.protocol_kills = 0.0
        settled = None if world.events.halted else _settle(world)
        outcome.steps = scheduler.steps
        outcome.simulated_seconds = scheduler.now
        outcome.events = _events(world)
        halted = world.events.halted
        if halted is not None:
            # a processor stopped and asks the operator for a fix (restore, backfill, an
            # archive): documented after its own lost disk or deleted history, a defect
            # otherwise; restarted without the fix it must stop again, and what was emitted
            # until then must still hold
            _after_halt(world)
            outcome.steps = scheduler.steps
            outcome.halted = halted
            # a twinned processor's directories: the twin's is new on its machine, and one
            # that missed a handoff the other instance completed is replaced as a lost one
            twinned = [] if world.twin_of is None else [world.twin_of]
            lost = {f"processor {j}" for j in [*world.events.lost_disks, *twinned]}
            documented = (
                "lost state directory" in halted
                and any(name in halted.replace("-", " ") for name in lost)
            ) or (world.events.retention and "retention deleted" in halted)
            if not documented:
                outcome.problems.append(f"stopped without a lost disk or retention: {halted}")
            outcome.problems += check_outputs(world).problems + check_time(world, None)
            outcome.problems += _false_alarms(world) + junk.problems()
            return outcome
        if settled is None:
            outcome.problems.append(_stuck(world))
            return outcome
        outcome.problems += check_world(world, settled).problems + check_time(world, settled)
        outcome.problems += _false_alarms(world) + junk.problems()
        return outcome
    finally:
        scheduler.end()


def _false_alarms(world: World) -> list[str]:
    return (
        [
            f"a processor stopped on a cause the world never had: {e}"
            for e in world.events.false_alarms
        ]
        + [f"false report: {line}" for line in world.events.false_reports]
        + [f"fewer partitions than processors: {line}" for line in world.events.below_processors]
    )


def _chaos(world: World, plan: Plan, twin: Twin, junk: Junk) -> None:
    scheduler = world.scheduler
    rng = world.rng
    next_look = 0.0
    kills = 0
    busy = True
    for step in range(plan.chaos_steps + CHAOS_EXTENSION_STEPS):
        if world.events.halted:
            return
        if step >= plan.chaos_steps and not busy:
            return
        if scheduler.now >= next_look:
            _supervise(world)
            twin.supervise(world.control())
            next_look = scheduler.now + SUPERVISE_SECONDS
            busy = world.operating()  # the faults reach the plan's last scales too
        if scheduler.step() is None:
            scheduler.now += SUPERVISE_SECONDS
        twin.step()
        junk.step(step)
        if plan.days_later and step == plan.chaos_steps // 2 and world.events.jumped_at is None:
            world.jump_days()  # unless aimed at a producer already (``tests/sim/aimed.py``)
        if world.kills_due or world.kills_now:
            kill_due(world)
        if plan.kill_rate and rng.random() < plan.kill_rate:
            if plan.max_kills is not None and kills >= plan.max_kills:
                continue
            kills += 1
            _kill_someone(world, plan)
        if plan.compact_rate and rng.random() < plan.compact_rate:
            compact(world)
        if plan.retention_rate and rng.random() < plan.retention_rate:
            delete_processed(world)
        if plan.outage_rate and rng.random() < plan.outage_rate:
            world.chaos.outage(rng.uniform(1.0, 6.0))


def _kill_someone(world: World, plan: Plan) -> None:
    rng = world.rng
    live = [j for j, party in sorted(world.processors.items()) if party.runnable]
    producers = [p for p in world.producers if p.runnable]
    if producers and (not live or rng.random() < 0.2):
        party = rng.choice(producers)
        world.scheduler.kill(party)
        world.events.kills.append(f"t={world.clock.monotonic():.2f} {party.name}")
        return
    if live:
        world.kill_processor(rng.choice(live), rng.random() < plan.lose_disk_rate)


def _supervise(world: World) -> None:
    with contextlib.suppress(KafkaIOError):
        world.supervise()


def _after_halt(world: World) -> None:
    """Run on for a while after a processor stopped for the operator: the supervisor keeps
    restarting it (and the rest), as a process manager would."""
    scheduler = world.scheduler
    until = scheduler.now + AFTER_HALT_SECONDS
    next_look = 0.0
    for _ in range(AFTER_HALT_STEPS):
        if scheduler.now >= until:
            return
        if scheduler.now >= next_look:
            _supervise(world)
            next_look = scheduler.now + SUPERVISE_SECONDS
        if scheduler.step() is None:
            scheduler.now += SUPERVISE_SECONDS


def _settle(world: World) -> int | None:
    """Step until the world is quiet; the processor count in force, or ``None`` if stuck."""
    scheduler = world.scheduler
    next_look = 0.0
    quiet_since: float | None = None
    budget = SETTLE_STEPS
    steps = total = 0
    operating = True
    while steps < budget and total < SETTLE_OPERATOR_FACTOR * budget:
        total += 1
        steps += 0 if operating else 1
        if world.events.halted:
            return None
        if scheduler.now >= next_look:
            _supervise(world)
            _operator_fixes(world)
            next_look = scheduler.now + SUPERVISE_SECONDS
            budget = max(budget, SETTLE_STEPS_PER_PARTY * len(scheduler.live()))
            operating = any(operator.runnable for operator in world.operators)
            processors = _quiet(world)
            if processors is None or scheduler.now - world.last_start < QUIET_SECONDS:
                quiet_since = None
            elif quiet_since is None:
                quiet_since = scheduler.now
            elif scheduler.now - quiet_since >= QUIET_SECONDS:
                return processors
        if scheduler.step() is None:
            scheduler.now += SUPERVISE_SECONDS
    return None


def _operator_fixes(world: World) -> None:
    """What ``status`` tells an operator to do: run ``expand`` again while a growth is
    unfinished, abort a scale whose receiver stopped."""
    if any(operator.runnable for operator in world.operators):
        return
    state = world.control()
    scale = state.scaling
    if scale is not None and scale.stopped:
        released = [h for h in scale.handoffs.values() if h.phase.value in ("RELEASED", "COMPLETE")]
        if released:  # it can neither finish nor be aborted: the operator must step in
            reasons = "; ".join(f"processor {j}: {why}" for j, why in sorted(scale.stopped.items()))
            world.events.halted = f"a scale that can only finish has a stopped receiver: {reasons}"
        else:
            start_operator(world, (Operation("abort"),))
        return
    entry = TopicRegistry(world.driver).read().get(INPUT)
    pending = entry is not None and (entry.growth is not None or entry.pending())
    if pending or state.growth is not None:
        start_operator(world, ())


def _quiet(world: World) -> int | None:
    """The processor count in force once nothing is left to do, else ``None``."""
    inputs = set(_inputs(world))
    if any(party.runnable for party in [*world.producers, *world.operators]) or any(
        t.firsts.keys() & inputs for t in world.broker.open_transactions.values()
    ):
        return None  # (an input transaction left open by a killed producer times out)
    state = world.control()
    if state.generation is None or state.scaling is not None or state.growth is not None:
        return None
    processors = state.generation.processors
    ends = {position: world.broker.read_end(position) for position in _inputs(world)}
    seen = (processors, tuple(sorted(ends.items())))
    if world.caught_up == seen:
        return processors  # the stores' offsets only grow once faults stopped: read once
    done: dict[tuple[str, int], int] = {}
    for j in range(processors):
        database = world.disks.read(world.state_path(j))
        if database is None:
            return None
        try:
            for position, offset in database.offsets().items():
                done[position] = max(done.get(position, 0), offset)
        finally:
            database.close()
    if any(done.get(position, 0) < end for position, end in ends.items() if end):
        return None
    world.caught_up = seen
    return processors


def _inputs(world: World) -> list[tuple[str, int]]:
    return [(INPUT, p) for p in range(world.broker.partition_count(INPUT))]


def _stuck(world: World) -> str:
    state = world.control()
    scale = state.scaling
    phases = {f"{s}->{t}": h.phase.value for (s, t), h in scale.handoffs.items()} if scale else None
    running = sorted(j for j, p in world.processors.items() if p.runnable)
    busy = [p.name for p in [*world.producers, *world.operators] if p.runnable]
    behind = []
    processors = state.generation.processors if state.generation else 0
    for j in range(processors):
        database = world.disks.read(world.state_path(j))
        if database is None:
            behind.append(f"processor {j}: no state")
            continue
        try:
            offsets = database.offsets()
        finally:
            database.close()
        behind.append(f"processor {j}: {dict(sorted(offsets.items()))}")
    return (
        f"not settled after {SETTLE_STEPS} steps (or {SETTLE_STEPS_PER_PARTY} per party, not "
        "counting an operator's) once faults stopped: generation "
        f"{state.generation}, scale {phases}, growth {state.growth}, processors running "
        f"{running}, still running {busy}; input ends (last record read + 1 / high watermark) "
        f"{[(world.broker.read_end(p), world.broker.partition(p).end) for p in _inputs(world)]}"
        f"; stores: {'; '.join(behind)}; last start at {world.last_start:.1f}s of "
        f"{world.scheduler.now:.1f}s"
    )


def _events(world: World) -> list[str]:
    events = world.events
    lines = [f"kill {k}" for k in events.kills]
    lines += [f"lost disk of processor {j}" for j in events.lost_disks]
    lines += [f"crash {e}" for e in events.errors]
    lines += [f"refused {r}" for r in events.refusals]
    lines += [f"twin: {t}" for t in events.twin]
    if events.compactions:
        lines.append(f"{events.compactions} compactions")
    if events.input_compacted:
        lines.append(
            f"the cleaner removed {events.input_compacted} input records "
            f"({len(events.unread_compacted)} before the group read past them)"
        )
    if events.retention:
        lines.append(f"retention deleted input {events.retention} times")
    if world.chaos.failures:
        lines.append(f"{world.chaos.failures} failed broker calls")
    if world.chaos.slow:
        lines.append(f"{world.chaos.slow} slow replies")
    if world.chaos.outages:
        lines.append(f"{world.chaos.outages} broker outages")
    if events.jumped_at is not None:
        lines.append(f"the clock jumped 12 days, to t={events.jumped_at:.2f}")
    return lines


def shrink(outcome: Outcome, budget: int = 60) -> Outcome:
    """A smaller failing schedule than ``outcome``'s (greedy: keep any simpler plan that
    still fails, until none does or ``budget`` runs are spent)."""
    best = outcome
    runs = 0
    improved = True
    while improved and runs < budget:
        improved = False
        for candidate in best.plan.simpler():
            runs += 1
            result = run_schedule(candidate)
            if not result.ok:
                best = result
                improved = True
                break
            if runs >= budget:
                break
    return best
