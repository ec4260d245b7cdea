"""Faults aimed at the protocol's narrow windows, which random kills reach too rarely.

At the plan's ``aimed_rate``, while the chaos phase lasts (a "growth" below is any change
of the input's partition count, a shrink too: ``expand`` holds the control log and records
it the same way; the faults aimed at a change's own steps are in
``tests/sim/aimed_changes.py``):

- when a handoff is released while other handoffs into the same receiver are not yet (a
  scale-in with several sources), the sources of those are killed (their releases come
  late) and the receiver is killed 0.3-2 s later: it restarts between two COMPLETEs, having
  processed the completed partitions live;
- when a growth is recorded in the control log, a random processor is killed: it lags behind
  the growth's thresholds when a scale right after moves its partitions;
- when a growth is recorded in the topic registry, the producers are cut off from the
  broker for 0.5-2 s: a lease renewal in flight (maybe answered late) cannot be followed by
  another; or, one time in two, until 0-2 s after the growth's fence (lease + delivery
  timeout + 1 s), before a record queued one delivery timeout late expires: a producer whose
  queue is full waits until its records expire, then must place the next one with a current
  count, and a record placed under a lease that ran out must not be sent;
- when a processor's fetch of the control log stops short of its end (a fetch cut short),
  the processor is cut off from the broker for 28-34 s, or only its fetches of the control
  log get nothing for 31-40 s: its read of the log to the end times out with only a part of
  the log read;
- when a growth lands in the registry of a plan with ``days_later``, the 12-day clock jump
  comes as a producer next queues a record (placed with its lease's counts, the old ones):
  the others run first, so it may land after the growth's fence (a late record);
- when a processor starts while the control log holds more than one record, its first
  fetch of the control log is cut short and its fetches of the control log then get
  nothing for 31-40 s (a chance of 0.3 x ``aimed_rate``, drawn in
  ``World.start_processor``): it must not act on ownership from the part it read;
- when a growth is recorded in the control log (``expand`` holds it), the reads the
  operators begin in the next 0.1 s reply 0.2-0.6 s late, and those the producers begin in
  the next 0.5 s reply 3-5 s late: a lease renewal that read the old counts before the
  growth reached the registry ends well after it (its lease runs from the read's start);
- when an operator begins a scale or an expand (at half the rate), a second operator tries
  the other at once: a scale to a neighbouring count, or the input grown to twice its
  partitions (at most 16). A scale and a growth must exclude each other however their
  reads and appends interleave;
- when a receiver's catch-up fetches a part of an input partition that the old owner has
  already committed past (at a fifth of the rate, once a world), retention deletes records
  after the part it fetched: the catch-up must stop, not read on from the earliest record.
"""

from __future__ import annotations

import json

from framework.coordination.registry import REGISTRY_TOPIC, TopicRegistry
from tests.sim.adversary import control_fact
from tests.sim.app import INPUT
from tests.sim.broker import StoredRecord
from tests.sim.operators import start_racer
from tests.sim.plan import COMPACTED_GROWTH, SHRINK_DRAWS, Operation, shrink_target
from tests.sim.world import World

__all__ = ["aim_at_protocol_windows"]

_RELEASED = ("RELEASE", "COMPLETE", "ABORT")


def aim_at_protocol_windows(world: World) -> None:
    """Watch the control log and the registry and strike at the windows above."""
    rate = world.plan.aimed_rate
    if not rate:
        return
    control_topic = world.app.config.control_topic
    rng = world.rng
    #: the last event of each handoff seen: (generation, source, target) -> event
    handoffs: dict[tuple[int, int, int], str] = {}

    def on_handoff(fact: dict[str, object]) -> None:
        key = (int(str(fact["generation"])), int(str(fact["source"])), int(str(fact["target"])))
        handoffs[key] = str(fact["event"])
        if fact["event"] != "RELEASE":
            return
        generation, _source, target = key
        still_open = [
            s
            for (g, s, t), event in handoffs.items()
            if g == generation and t == target and event not in _RELEASED
        ]
        if still_open and rng.random() < rate:
            for source in still_open:
                world.kill_processor(source, False, "(aimed: a release comes late)")
            due = world.clock.monotonic() + rng.uniform(0.3, 2.0)
            world.kills_due.append((due, target))

    def watch(record: StoredRecord) -> None:
        if not world.chaos.active or record.value is None:
            return
        if record.topic == control_topic:
            fact = control_fact(record.value)
            if fact is None:
                return
            if fact.get("type") == "handoff":
                on_handoff(fact)
            elif fact.get("type") == "growth" and rng.random() < rate:
                live = sorted(j for j, party in world.processors.items() if party.runnable)
                if live:
                    victim = rng.choice(live)
                    world.kill_processor(victim, False, "(aimed: it lags behind a growth)")
            if fact.get("type") == "growth" and rng.random() < rate:
                operators = [o.name for o in world.operators if o.runnable]
                world.chaos.late_replies(operators, 0.1, (0.2, 0.6))
                producers = [p.name for p in world.producers if p.runnable]
                world.chaos.late_replies(producers, 0.5, (3.0, 5.0))
        elif (
            record.topic == REGISTRY_TOPIC
            and _growth_recorded(record.value)
            and rng.random() < rate
        ):
            producers = [p.name for p in world.producers if p.runnable]
            if world.plan.days_later and world.events.jumped_at is None:
                # the machine is suspended as a producer places a record with the counts
                # of its lease, still the old ones, and queues it only after the fence
                world.chaos.pause_in_produce = (world.jump_days, frozenset(producers))
            topic = world.app.config.inputs[0]
            lease, timeout = (
                topic.producer_lease_ms / 1000,
                topic.producer_delivery_timeout_ms / 1000,
            )
            if rng.random() < 0.5:  # past the fence, before a record queued late expires
                seconds = rng.uniform(lease + timeout + 1.0, lease + timeout + 3.0)
            else:
                seconds = rng.uniform(0.5, 2.0)
            world.chaos.isolate(producers, seconds)

    deleted_under_catch_up = False

    def on_catch_up_fetch(records: list[StoredRecord]) -> None:
        nonlocal deleted_under_catch_up
        last = records[-1]
        committed = world.broker.groups.get(world.app.config.app_id, {}).get(
            (INPUT, last.partition), 0
        )
        if deleted_under_catch_up or committed <= last.offset + 1 or rng.random() >= rate * 0.2:
            return
        deleted_under_catch_up = True
        world.broker.delete_before(INPUT, last.partition, rng.randint(last.offset + 2, committed))
        world.events.retention += 1

    def on_fetch(process: str, consumer: str, records: list[StoredRecord]) -> None:
        if not world.chaos.active or not records:
            return
        if consumer == "catch-up consumer" and records[-1].topic == INPUT:
            on_catch_up_fetch(records)
            return
        if records[-1].topic != control_topic:
            return
        name = process.split("#", maxsplit=1)[0]
        end = world.broker.end_offset(control_topic, 0)
        short = records[-1].offset + 1 < end
        if name.startswith("processor-") and short and rng.random() < rate:
            if rng.random() < 0.5:
                world.chaos.isolate([name], rng.uniform(28.0, 34.0))
            else:  # only the control log's leader is away: its other calls work
                world.chaos.starve(name, control_topic, rng.uniform(31.0, 40.0))

    def on_operation(operation: Operation) -> None:
        current = world.scheduler.current
        if not world.chaos.active or current is None or current.name == "racer":
            return
        if operation.kind in ("scale", "expand") and rng.random() < rate * 0.5:
            racing = _racing(world, operation)
            if racing is not None:
                start_racer(world, racing)

    world.broker.watchers.append(watch)
    world.broker.fetch_watchers.append(on_fetch)
    world.operation_watchers.append(on_operation)


def _racing(world: World, operation: Operation) -> Operation | None:
    """What a second operator tries as ``operation`` begins: a change of the input's count
    against a scale (twice the partitions producers place keys in, at most 16, or, with
    ``SHRINK_DRAWS``, one time in three fewer), a scale to a neighbouring count against a
    change (``None`` when none fits)."""
    entry = TopicRegistry(world.driver).read().get(INPUT)
    partitions = world.plan.partitions if entry is None else entry.partitions
    if operation.kind == "scale":
        return _racing_change(world, operation.value, partitions)
    generation = world.control().generation
    if generation is None:
        return None
    processors = generation.processors
    if processors + 1 <= partitions:
        return Operation("scale", processors + 1)
    if processors - 1 >= world.plan.initial_processors:
        return Operation("scale", processors - 1)
    return None


def _racing_change(world: World, processors: int, partitions: int) -> Operation | None:
    """The change of the input's count a second operator tries against a scale to
    ``processors`` (``partitions``: the registry's count now)."""
    if world.plan.compacted and not COMPACTED_GROWTH:
        return None
    generation = world.control().generation
    low = max(world.plan.partitions, processors)
    if generation is not None:
        low = max(low, generation.processors)
    fewer = shrink_target(world.rng, partitions, low) if SHRINK_DRAWS else None
    if fewer is not None and world.rng.random() < 1 / 3:
        return Operation("expand", fewer)
    return Operation("expand", partitions * 2) if partitions * 2 <= 16 else None


def _growth_recorded(value: bytes) -> bool:
    """Whether a registry record records a growth's new count (its fence not known yet);
    one that is not JSON (``tests/sim/junk.py``) records nothing."""
    try:
        entry = json.loads(value)
    except ValueError:
        return False
    growth = entry.get("growth") if isinstance(entry, dict) else None
    return isinstance(growth, dict) and growth.get("fence_ends") is None
