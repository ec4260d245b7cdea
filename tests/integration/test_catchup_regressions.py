"""Regressions of the catch-up protocol's wrong-state defects, driving ``CatchUp`` and the old
owner's release against the real broker with every other party played by the test."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from framework.coordination.registry import TopicEntry
from framework.kafka import Clients
from framework.processing import ProcessorStoppedError
from framework.runtime.final_offsets import final_offsets
from rebalance import HandoffEvent, bucket, key_hash
from tests.integration.catchup_world import (
    World,
    drive,
    hand_over,
    handoff,
    release,
    send,
    settle,
)

pytestmark = pytest.mark.integration

START, CAUGHT_UP, COMPLETE = (
    HandoffEvent.START_CATCH_UP,
    HandoffEvent.CAUGHT_UP,
    HandoffEvent.COMPLETE,
)
KEYS = [f"key-{i}".encode() for i in range(240)]


def owner(b: int, processors: int) -> object:
    return lambda key: bucket(key_hash(key), b, processors)


def test_scale_in_after_a_growth_applies_only_the_keys_it_gains(
    kafka_bootstrap: str, kafka_admin: AdminClient
) -> None:
    """B=2, input grown 4 -> 8, P 5 -> 4: partition 4 returns to processor 0, whose own
    partition 0 is its parent. Processor 0's own keys must not be applied a second time."""
    world = World(kafka_bootstrap, kafka_admin, partitions=8, initial=4, b=2)
    world.produce(KEYS * 3)
    world.grow(8)
    world.produce(KEYS * 2)
    database = world.database(0)
    world.seed_state(database, lambda k: bucket(key_hash(k), 2, 5) == 0, {0})
    world.commit_group({p: world.ends[p] for p in range(8)})
    state = send(world.control(5, 4), 4, 0, START)
    catchup = world.catch_up(0, state, database)
    try:
        hand_over(state, catchup, 4, 0, {(world.topic, 4): world.ends[4]})
    finally:
        catchup.close()
    mine = [k for k in KEYS if bucket(key_hash(k), 2, 4) == 0]
    assert world.state(database, mine) == {k: world.truth[k] for k in mine}


def test_a_restarted_receiver_leaves_completed_handoffs_alone(
    kafka_bootstrap: str, kafka_admin: AdminClient
) -> None:
    """Scale 5 -> 2 (B=2): processor 0 receives from 2 and from 4. It restarts after 4 -> 0
    completed (and it processed partition 4 live since) and before 2 -> 0 did."""
    world = World(kafka_bootstrap, kafka_admin, partitions=8, initial=8, b=2)
    world.produce(KEYS * 5)
    database = world.database(0)
    world.seed_state(database, lambda k: bucket(key_hash(k), 2, 5) == 0, {0})
    world.commit_group({p: world.ends[p] for p in range(8)})
    state = send(world.control(5, 2), 4, 0, START)
    state = send(state, 2, 0, START)
    first = world.catch_up(0, state, database)
    try:
        state = hand_over(state, first, 4, 0, {(world.topic, 4): world.ends[4]})
        state = send(state, 4, 0, COMPLETE)
    finally:
        first.close()  # the receiver dies here
    # meanwhile (or after its restart) it processes partition 4 live, as its owner
    start = world.ends[4]
    world.produce([k for k in KEYS if bucket(key_hash(k), 8, 8) == 4] * 5)
    world.process_live(database, 4, start)
    second = world.catch_up(0, state, database)
    try:
        hand_over(state, second, 2, 0, {(world.topic, p): world.ends[p] for p in (2, 6)})
        settle(second)  # whatever it would still read, it reads
    finally:
        second.close()
    mine = [k for k in KEYS if bucket(key_hash(k), 2, 2) == 0]
    assert world.state(database, mine) == {k: world.truth[k] for k in mine}


def test_a_receiver_refuses_a_release_below_what_it_rebuilt(
    kafka_bootstrap: str, kafka_admin: AdminClient
) -> None:
    """F below T2 (an old owner that lost its state released too early) is a protocol
    error: the receiver stops instead of taking over and applying records twice."""
    world = World(kafka_bootstrap, kafka_admin, partitions=2, initial=2, b=1)
    world.produce(KEYS * 2)
    world.commit_group({p: world.ends[p] for p in range(2)})
    database = world.database(1)
    state = send(world.control(1, 2), 0, 1, START)
    catchup = world.catch_up(1, state, database)
    try:
        drive(catchup, lambda: catchup.caught_up(handoff(state, 0, 1), 0))
        state = send(state, 0, 1, CAUGHT_UP)
        state = release(state, 0, 1, {(world.topic, 1): world.ends[1] - 7})
        with pytest.raises(ProcessorStoppedError, match="T2 > F"):
            catchup.release(handoff(state, 0, 1))
            drive(catchup, lambda: catchup.finished(handoff(state, 0, 1)), seconds=5)
    finally:
        catchup.close()


def test_an_old_owner_rebuilding_lost_state_does_not_release_below_the_group_offset(
    kafka_bootstrap: str, kafka_admin: AdminClient
) -> None:
    """The old owner's state directory was lost while its handoff was READY: its state
    offset is below the group's committed offset until restore mode catches up. F must be
    at least the group's offset, so it waits instead of releasing lower."""
    world = World(kafka_bootstrap, kafka_admin, partitions=2, initial=2, b=1)
    world.produce(KEYS * 2)
    moved = (world.topic, 1)
    committed = world.ends[1]
    world.commit_group({1: committed})
    database = world.database(0)
    batch = database.begin()
    batch.set_offset(world.topic, 1, committed - 30)  # rebuilt only partly so far
    batch.commit()
    consumer = Clients({"bootstrap.servers": kafka_bootstrap}).consumer(world.app.app_id)

    def final() -> dict[tuple[str, int], int] | None:
        return final_offsets(
            0, {moved}, database=database, consumer=consumer, inputs={}, notes=set()
        )

    try:
        assert final() is None
        batch = database.begin()
        batch.set_offset(world.topic, 1, committed)  # restored
        batch.commit()
        assert final() == {moved: committed}
    finally:
        consumer.close()


def test_an_old_owner_does_not_release_a_parent_below_a_childs_threshold(
    kafka_bootstrap: str, kafka_admin: AdminClient
) -> None:
    """Below a growth threshold the parent still holds records of the child's keys; its new
    owner neither owns those keys nor has their state, so the old owner processes past the
    threshold before it releases the parent."""
    world = World(kafka_bootstrap, kafka_admin, partitions=2, initial=1, b=1)
    world.produce(KEYS)
    world.grow(2)  # partition 1 is split from partition 0 at its current end
    world.produce(KEYS)
    threshold = world.thresholds[1]
    moved = (world.topic, 0)
    database = world.database(0)
    batch = database.begin()
    batch.set_offset(world.topic, 0, threshold - 5)  # the old owner lags behind it
    batch.commit()
    world.commit_group({0: threshold - 5})
    inputs = {world.topic: TopicEntry(world.history)}
    consumer = Clients({"bootstrap.servers": kafka_bootstrap}).consumer(world.app.app_id)

    def final() -> dict[tuple[str, int], int] | None:
        return final_offsets(
            0, {moved}, database=database, consumer=consumer, inputs=inputs, notes=set()
        )

    try:
        assert final() is None
        batch = database.begin()
        batch.set_offset(world.topic, 0, threshold)
        batch.commit()
        assert final() == {moved: threshold}
    finally:
        consumer.close()
