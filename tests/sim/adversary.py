"""The world's adversary besides the chaos's faults (``tests/sim/driver.py`` calls these on a
``World``): kills right after handoff records land, retention and compaction passes, and a
watcher of the partition counts the registry gives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from framework.coordination.registry import REGISTRY_TOPIC, TopicRegistry
from framework.errors import SplitstateError
from rebalance.control_schema import check_record
from rebalance.record_checks import MalformedRecordError, json_object
from tests.sim.app import INPUT, names_input
from tests.sim.broker import StoredRecord

if TYPE_CHECKING:
    from tests.sim.world import World

__all__ = [
    "compact",
    "compact_input",
    "control_fact",
    "delete_processed",
    "kill_at_protocol_steps",
    "kill_due",
    "watch_counts",
]


def kill_at_protocol_steps(world: World) -> None:
    """From now on, right after a handoff record lands, kill one of its two processors
    (at the plan's rate): the writer between two calls, or the other side; half of the
    kills come 0.2-3 seconds later instead."""
    config_topic = world.app.config.control_topic

    def watch(record: StoredRecord) -> None:
        if record.topic != config_topic or record.value is None or not world.chaos.active:
            return
        if b'"handoff"' not in record.value or world.rng.random() >= world.protocol_kills:
            return
        fact = control_fact(record.value)
        if fact is None:
            return
        victim = world.rng.choice([int(fact["source"]), int(fact["target"])])
        if world.rng.random() < 0.5:  # now, or a little later (live records meanwhile)
            world.kill_processor(victim, world.rng.random() < world.plan.lose_disk_rate)
        else:
            due = world.clock.monotonic() + world.rng.uniform(0.2, 3.0)
            world.kills_due.append((due, victim))

    world.broker.watchers.append(watch)


def watch_counts(world: World) -> None:
    """Note every registry record that gives the input fewer partitions than the
    processors in force or scaled to (``expand`` must refuse it: scale in first)."""

    def watch(record: StoredRecord) -> None:
        if record.topic != REGISTRY_TOPIC or not names_input(record.key) or not record.value:
            return
        try:  # the entry every reader keeps (a record written from an older copy is not)
            kept = TopicRegistry(world.driver).read().get(INPUT)
        except SplitstateError:
            return
        state = world.control()
        if kept is None or state.generation is None:
            return
        counts = list(kept.history.counts)
        processors = state.generation.processors
        if state.scaling is not None:
            processors = max(processors, state.scaling.new_processors)
        if counts[-1] < processors:
            world.events.below_processors.append(
                f"t={world.clock.monotonic():.2f} the registry gives {INPUT} "
                f"{counts[-1]} partitions ({counts}) with {processors} processors"
            )

    world.broker.watchers.append(watch)


def delete_processed(world: World) -> None:
    """Retention deletes a prefix of an input partition that the app's group already
    committed (what a retention longer than the processing lag deletes)."""
    partitions = world.broker.partition_count(INPUT)
    if not partitions:
        return
    partition = world.rng.randrange(partitions)
    committed = world.broker.groups.get(world.app.config.app_id, {}).get((INPUT, partition))
    if committed:
        world.broker.delete_before(INPUT, partition, world.rng.randint(1, committed))
        world.events.retention += 1


def kill_due(world: World) -> None:
    """Carry out the kills whose time came."""
    now = world.clock.monotonic()
    due = [victim for at, victim in world.kills_due if at <= now]
    world.kills_due = [(at, victim) for at, victim in world.kills_due if at > now]
    for victim in due:
        world.kill_processor(victim, world.rng.random() < world.plan.lose_disk_rate)
    for victim in world.kills_now:
        world.kill_processor(victim, False, "right after it re-created its lost state directory")
    world.kills_now = []


def compact(world: World) -> None:
    """Compact the control log and the topic registry, and a compacted input."""
    world.broker.compact(world.app.config.control_topic, world.rng)
    world.broker.compact(REGISTRY_TOPIC, world.rng)
    world.events.compactions += 1
    if world.plan.compacted:
        compact_input(world)


def compact_input(world: World) -> None:
    """One pass of the cleaner over the input (``Broker.clean``); notes the records it
    removed before the app's group read past them."""
    group = world.broker.groups.get(world.app.config.app_id, {})
    committed = {p: offset for (topic, p), offset in group.items() if topic == INPUT}
    now_ms = int(world.clock.time() * 1000)
    removed = world.broker.clean(INPUT, world.rng, now_ms, committed)
    world.events.input_compacted += len(removed)
    for record in removed:
        if record.offset >= committed.get(record.partition, 0):
            world.events.unread_compacted.add((record.partition, record.offset))


def control_fact(value: bytes) -> dict[str, Any] | None:
    """The control-log record ``value`` as every reader reads it, ``None`` when it is none
    (no reader can read it, or its kind is unknown): the world's watchers act on facts."""
    try:
        return check_record(json_object(value))
    except MalformedRecordError:
        return None
