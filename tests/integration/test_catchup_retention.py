"""Retention deleting records a catch-up no longer needs must not stop it (nor refuse the
scale): only the still-needed range of each S2 partition has to be in Kafka. Drives
``CatchUp`` and the scale command's history check against the real broker."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from framework.config import ConfigError
from framework.coordination.registry import TopicEntry
from framework.coordination.scaling import _check_history
from framework.kafka import Clients
from rebalance import HandoffEvent, bucket, key_hash
from tests.integration.catchup_world import World, drive, hand_over, handoff, send

pytestmark = pytest.mark.integration

KEYS = [f"key-{i}".encode() for i in range(240)]


def delete_before(admin: AdminClient, topic: str, partition: int, offset: int) -> None:
    """Delete the records of ``topic[partition]`` before ``offset``, as retention would."""
    futures = admin.delete_records([TopicPartition(topic, partition, offset)])
    for future in futures.values():
        future.result(timeout=30)


def gained(b: int, processors: int, processor: int) -> list[bytes]:
    return [k for k in KEYS if bucket(key_hash(k), b, processors) == processor]


def grown_while_empty(bootstrap: str, admin: AdminClient) -> World:
    """B=2, input grown 2 -> 4 while empty (thresholds 0), then written and committed, then
    the parents' first records deleted: a scale 2 -> 4 needs nothing of partitions 0 and 1."""
    world = World(bootstrap, admin, partitions=4, initial=2, b=2)
    world.grow(4)
    assert world.thresholds == {2: 0, 3: 0}
    world.produce(KEYS * 3)
    world.commit_group({p: world.ends[p] for p in range(4)})
    for parent in (0, 1):
        assert world.ends[parent] > 5
        delete_before(admin, world.topic, parent, 5)
    return world


def test_a_parent_empty_at_the_growth_may_lose_its_first_records(
    kafka_bootstrap: str, kafka_admin: AdminClient
) -> None:
    """Processor 2 rebuilds the keys it gains from partition 2 alone, exactly."""
    world = grown_while_empty(kafka_bootstrap, kafka_admin)
    state = send(world.control(2, 4), 0, 2, HandoffEvent.START_CATCH_UP)
    database = world.database(2)
    catchup = world.catch_up(2, state, database)
    try:
        hand_over(state, catchup, 0, 2, {(world.topic, 2): world.ends[2]})
    finally:
        catchup.close()
    mine = gained(2, 4, 2)
    assert mine and world.state(database, mine) == {k: world.truth[k] for k in mine}


def test_a_scale_is_accepted_when_only_unneeded_history_was_deleted(
    kafka_bootstrap: str, kafka_admin: AdminClient
) -> None:
    """The scale command's history check asks only for what receivers will read."""
    world = grown_while_empty(kafka_bootstrap, kafka_admin)
    kafka = Clients({"bootstrap.servers": kafka_bootstrap})
    entries = {world.topic: TopicEntry(world.history)}
    _check_history(kafka, world.app, entries, b=2, current=2, processors=4)
    # history a receiver does need is still checked
    delete_before(kafka_admin, world.topic, 2, 3)
    with pytest.raises(ConfigError, match=rf"{world.topic}\[2\] starts at 3"):
        _check_history(kafka, world.app, entries, b=2, current=2, processors=4)


def test_a_parent_already_read_to_its_threshold_may_lose_its_first_records(
    kafka_bootstrap: str, kafka_admin: AdminClient
) -> None:
    """A receiver read parent 0 up to the threshold, then restarted; meanwhile retention
    deleted partition 0 past the threshold. The restarted catch-up needs nothing more of
    partition 0 and must finish with exact state instead of stopping."""
    world = World(kafka_bootstrap, kafka_admin, partitions=4, initial=2, b=2)
    world.produce(KEYS * 3)
    world.grow(4)
    world.produce(KEYS * 2)
    world.commit_group({p: world.ends[p] for p in range(4)})
    threshold = world.thresholds[2]
    assert 0 < threshold < world.ends[0]
    state = send(world.control(2, 4), 0, 2, HandoffEvent.START_CATCH_UP)
    database = world.database(2)
    first = world.catch_up(2, state, database)
    try:
        drive(first, lambda: first.caught_up(handoff(state, 0, 2), 0))
        assert first.positions[(world.topic, 0)] == threshold
    finally:
        first.close()  # the receiver restarts here
    delete_before(kafka_admin, world.topic, 0, threshold + 3)
    second = world.catch_up(2, state, database)
    try:
        hand_over(state, second, 0, 2, {(world.topic, 2): world.ends[2]})
    finally:
        second.close()
    mine = gained(2, 4, 2)
    assert mine and world.state(database, mine) == {k: world.truth[k] for k in mine}
