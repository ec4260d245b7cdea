"""RegistryLease's background renewal runs on its Clock and stops once the lease is closed.

The renewer is started with ``clock.start`` and waits with ``clock.sleep`` only; here a clock
runs it in the test's thread (as the simulation runs it as one more party), with a real
producer whose metadata is read from the broker.
"""

from __future__ import annotations

from framework.coordination.registry import TopicEntry
from framework.growth.lease import RegistryLease
from framework.kafka.confluent_producer import ConfluentProducer
from rebalance import TopicHistory
from tests.clocks import ManualClock
from tests.conftest import ProducerFactory, TopicFactory


class CountingRegistry:
    """The registry's entries, counting reads."""

    def __init__(self, entries: dict[str, TopicEntry]) -> None:
        self.entries = entries
        self.reads = 0

    def read(self) -> dict[str, TopicEntry]:
        self.reads += 1
        return dict(self.entries)


def test_the_renewer_renews_after_each_sleep_and_returns_once_closed(
    topic_factory: TopicFactory, producer_factory: ProducerFactory
) -> None:
    topic = topic_factory(partitions=4)
    entries = {topic: TopicEntry(TopicHistory.of(topic, [4]), lease_ms=10_000)}
    registry = CountingRegistry(entries)
    clock = ManualClock(1000.0)
    lease = RegistryLease(registry, entries, clock)
    lease.start(ConfluentProducer(producer_factory()))
    [(name, renewer)] = clock.started
    assert name == "registry-lease" and registry.reads == 0  # nothing ran yet

    def close_at_third(sleeps: int) -> None:
        if sleeps == 3:
            lease.close()

    clock.on_sleep = close_at_third
    renewer()  # returns: the lease was closed during its third sleep
    assert clock.sleeps == 3
    assert registry.reads == 2  # after the first two sleeps, never once closed
    assert lease.fresh()


def test_a_lease_closed_while_it_waits_for_new_partitions_stops_waiting(
    topic_factory: TopicFactory, producer_factory: ProducerFactory
) -> None:
    # the registry says 8 partitions; the broker's metadata keeps showing 4
    topic = topic_factory(partitions=4)
    held = {topic: TopicEntry(TopicHistory.of(topic, [4]), lease_ms=10_000)}
    grown = {topic: TopicEntry(TopicHistory.of(topic, [4, 8]), lease_ms=10_000)}
    registry = CountingRegistry(grown)
    clock = ManualClock(1000.0)
    lease = RegistryLease(registry, held, clock)
    lease.start(ConfluentProducer(producer_factory()))
    [(_name, renewer)] = clock.started

    def close_at_third(sleeps: int) -> None:
        if sleeps == 3:  # the first renewal's second wait for metadata
            lease.close()

    clock.on_sleep = close_at_third
    renewer()
    assert clock.sleeps == 3, "the closed lease went on waiting for Kafka metadata"
    assert registry.reads == 1
    assert lease.partitioner.partitions(topic) == 4  # the unconfirmed count was not taken
