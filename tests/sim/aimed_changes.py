"""Faults aimed at changes of the input's partition count (growths and shrinks), which random
kills reach too rarely. At the plan's ``aimed_rate``, while the chaos phase lasts:

- right after each step of a change lands (its count recorded with the holds or starts, its
  fence ends recorded, each marker or drain marker written, its markers recorded), the
  operator who wrote it is killed (at a third of the rate); it starts again a few seconds
  later and runs the same command again (``tests/sim/operators.py``), which must resume;
- when a shrink is recorded, the processor that owns one of its survivors is killed 0.5-8 s
  later, while the survivor holds the keys of the deleted partitions (the fence takes longer);
- when a change is recorded (at half the rate), a producer pauses between placing a record
  and queueing it (a stalled process: its lease was valid when it placed the record) for
  longer than the fence, sometimes across the next change too (``8 -> 4 -> 8``): its record
  lands late in a parent or a deleted partition (a dead letter), or, placed with a count in
  force again, in the key's home;
- when a change is recorded (once a world, at a third of the rate), a processor is stopped
  for 25-60 s, across the next changes, then started again, one time in three with its
  state directory lost.
"""

from __future__ import annotations

import json

from framework.coordination.registry import REGISTRY_TOPIC
from framework.growth.markers import is_marker
from rebalance import bucket
from tests.sim.app import INPUT, names_input
from tests.sim.broker import StoredRecord
from tests.sim.operators import kill_operator
from tests.sim.world import World

__all__ = ["aim_at_changes", "change_step"]


def aim_at_changes(world: World) -> None:
    """Watch the registry and the input and strike at the windows above."""
    rate = world.plan.aimed_rate
    if not rate:
        return
    rng = world.rng
    stopped_once = False

    def watch(record: StoredRecord) -> None:
        nonlocal stopped_once
        if not world.chaos.active:
            return
        step = _step_of(record)
        if step is None:
            return
        writer = world.scheduler.current
        while writer is not None and writer.parent is not None:
            writer = writer.parent
        if writer in world.operators and rng.random() < rate / 3:
            kill_operator(world, writer, f"(aimed: right after the change's {step})")
        if step == "shrink recorded" and rng.random() < rate:
            _kill_a_survivors_owner(world, record)
        if step.endswith("recorded") and rng.random() < rate / 2:
            _pause_a_producer(world)
        if step.endswith("recorded") and not stopped_once and rng.random() < rate / 3:
            stopped_once = True
            _stop_a_processor(world)

    world.broker.watchers.append(watch)


def _step_of(record: StoredRecord) -> str | None:
    """The step of a change a record is (``None``: none): ``grow recorded`` or ``shrink
    recorded`` (the count, with the starts or the holds), ``fenced``, ``done`` (the markers
    recorded: no change in progress) for a registry record of the input, ``marker`` for a
    marker written to the input."""
    if record.topic == INPUT:
        return "marker" if is_marker(record.headers) else None
    if record.topic != REGISTRY_TOPIC or not names_input(record.key) or record.value is None:
        return None
    return change_step(record.value)


def change_step(value: bytes) -> str | None:
    """The step of a change a registry record of the input records (see ``_step_of``);
    ``None`` for one that is not JSON (``tests/sim/junk.py``)."""
    try:
        entry = json.loads(value)
    except ValueError:
        return None
    if not isinstance(entry, dict):
        return None
    growth = entry.get("growth")
    if not isinstance(growth, dict):
        return "done"
    if growth.get("fence_ends") is None:
        return f"{growth.get('kind', 'grow')} recorded"
    return "fenced"


def _kill_a_survivors_owner(world: World, record: StoredRecord) -> None:
    """Kill the owner of one of the survivors the shrink ``record`` holds, a little later."""
    assert record.value is not None
    steps = json.loads(record.value).get("steps") or []
    holds = steps[-1].get("holds") if steps and isinstance(steps[-1], dict) else None
    generation = world.control().generation
    if not isinstance(holds, dict) or not holds or generation is None:
        return
    survivor = int(world.rng.choice(sorted(holds)))
    owner = bucket(survivor, world.plan.initial_processors, generation.processors)
    world.kills_due.append((world.clock.monotonic() + world.rng.uniform(0.5, 8.0), owner))


def _pause_a_producer(world: World) -> None:
    """The next record one of the producers queues waits between its placement and its
    queueing for longer than the fence (``Events.resumes``)."""
    producers = [p.name for p in world.producers if p.runnable]
    if not producers:
        return
    topic = world.app.config.inputs[0]
    fence = (topic.producer_lease_ms + topic.producer_delivery_timeout_ms) / 1000 + 1.0
    seconds = world.rng.uniform(fence + 1.0, 45.0)

    def pause() -> None:
        world.clock.sleep(seconds)
        world.events.resumes.append(int(world.clock.time() * 1000))

    world.chaos.pause_in_produce = (pause, frozenset([world.rng.choice(producers)]))


def _stop_a_processor(world: World) -> None:
    """Stop a running processor for 25-60 s (its state directory lost one time in three)."""
    running = sorted(j for j, party in world.processors.items() if party.runnable)
    if not running:
        return
    victim = world.rng.choice(running)
    lose = world.rng.random() < 1 / 3
    world.kill_processor(victim, lose, "(aimed: stopped across the next changes)")
    world.restart_at[victim] = world.clock.monotonic() + world.rng.uniform(25.0, 60.0)
