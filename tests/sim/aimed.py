"""Faults aimed at the protocol's narrow windows, which random kills reach too rarely.

At the plan's ``aimed_rate``, while the chaos phase lasts:

- when a handoff is released while other handoffs into the same receiver are not yet (a
  scale-in with several sources), the sources of those are killed (their releases come
  late) and the receiver is killed 0.3-2 s later: it restarts between two COMPLETEs, having
  processed the completed partitions live;
- when a growth is recorded in the control log, a random processor is killed: it lags behind
  the growth's thresholds when a scale right after moves its partitions;
- when a growth lands in the topic registry, the producers are cut off from the broker for
  0.5-2 s: a lease renewal in flight (maybe answered late) cannot be followed by another; or,
  one time in two, until after the growth's fence (lease + delivery timeout + 1 s) but
  before a record queued one delivery timeout late expires: a producer whose queue is full
  waits until its records expire, then must place the next one with a current count;
- when a processor's fetch of the control log stops short of its end (a fetch cut short),
  the processor is cut off from the broker for 28-34 s, or only its fetches of the control
  log get nothing for 31-40 s: its read of the log to the end times out with only a part of
  the log read;
- when a growth lands in the registry of a plan with ``days_later``, the 12-day clock jump
  comes as a producer next queues a record (placed with its lease's counts, the old ones):
  the others run first, so it may land after the growth's fence (a late record);
- when a processor starts, its first fetch of the control log (of more than one record) is
  cut short and its fetches of the control log then get nothing for 31-40 s (a chance of
  0.3 x ``aimed_rate``, drawn in ``World.start_processor``): it must not act on ownership
  from the part it read.
"""

from __future__ import annotations

import json

from framework.coordination.registry import REGISTRY_TOPIC
from tests.sim.broker import StoredRecord
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
            fact = json.loads(record.value)
            if fact.get("type") == "handoff":
                on_handoff(fact)
            elif fact.get("type") == "growth" and rng.random() < rate:
                live = sorted(j for j, party in world.processors.items() if party.runnable)
                if live:
                    victim = rng.choice(live)
                    world.kill_processor(victim, False, "(aimed: it lags behind a growth)")
        elif record.topic == REGISTRY_TOPIC:
            entry = json.loads(record.value)
            if isinstance(entry, dict) and entry.get("growth") and rng.random() < rate:
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
                    seconds = rng.uniform(lease + timeout + 1.0, lease + 2 * timeout)
                else:
                    seconds = rng.uniform(0.5, 2.0)
                world.chaos.isolate(producers, seconds)

    def on_fetch(process: str, records: list[StoredRecord]) -> None:
        if not world.chaos.active or not records or records[-1].topic != control_topic:
            return
        name = process.split("#", maxsplit=1)[0]
        end = world.broker.end_offset(control_topic, 0)
        short = records[-1].offset + 1 < end
        if name.startswith("processor-") and short and rng.random() < rate:
            if rng.random() < 0.5:
                world.chaos.isolate([name], rng.uniform(28.0, 34.0))
            else:  # only the control log's leader is away: its other calls work
                world.chaos.starve(name, control_topic, rng.uniform(31.0, 40.0))

    world.broker.watchers.append(watch)
    world.broker.fetch_watchers.append(on_fetch)
