"""The producers' registry lease, measured with a fake clock (no waiting, no broker)."""

from __future__ import annotations

import logging
import threading

import pytest

from framework.clock import SYSTEM_CLOCK
from framework.coordination.registry import TopicEntry
from framework.growth.lease import ProducerLeaseError, RegistryLease
from rebalance import TopicHistory
from tests.clocks import ManualClock


class SlowRegistry:
    """A registry whose read takes ``read_seconds`` of the fake clock."""

    def __init__(self, clock: ManualClock, entries: dict[str, TopicEntry], read_seconds: float):
        self.clock = clock
        self.entries = entries
        self.read_seconds = read_seconds
        self.reads = 0

    def read(self) -> dict[str, TopicEntry]:
        self.reads += 1
        self.clock.now += self.read_seconds
        return dict(self.entries)


def _entry(topic: str, lease_ms: int = 10_000) -> TopicEntry:
    return TopicEntry(TopicHistory.of(topic, [4]), lease_ms=lease_ms)


def test_a_lease_without_topics_never_runs_out() -> None:
    clock = ManualClock(1000.0)
    lease = RegistryLease(SlowRegistry(clock, {}, 0.0), {}, clock=clock)
    clock.now += 12 * 24 * 3600.0  # past the ~11.6 days of the old 10**9 ms fallback
    assert lease.fresh()
    lease.check()  # nothing to be stale about: no error
    clock.now += 10.0**12
    assert lease.fresh()
    lease.check()


def test_a_lease_runs_out_after_its_lease_without_renewal() -> None:
    clock = ManualClock(1000.0)
    entries = {"t": _entry("t", lease_ms=10_000)}
    lease = RegistryLease(SlowRegistry(clock, entries, 0.0), entries, clock=clock)
    clock.now += 9.9
    assert lease.fresh()
    clock.now += 0.2
    assert not lease.fresh()
    with pytest.raises(ProducerLeaseError, match="make Kafka reachable"):
        lease.check()


def test_renewal_counts_from_the_start_of_the_registry_read() -> None:
    # The counts a read returns are as of when it started: a growth recorded while it ran
    # is not in them. So the lease they are held under starts then, not when the read ends.
    clock = ManualClock(1000.0)
    entries = {"t": _entry("t", lease_ms=10_000)}
    registry = SlowRegistry(clock, entries, 8.0)
    lease = RegistryLease(registry, entries, clock=clock)
    clock.now += 5.0
    started = clock.now
    assert lease.renew()
    assert clock.now == started + 8.0  # the read took 8 s
    clock.now = started + 9.9
    assert lease.fresh()
    clock.now = started + 10.1  # 10.1 s after the read began, 2.1 s after it ended
    assert not lease.fresh()
    with pytest.raises(ProducerLeaseError):
        lease.check()


def test_a_failed_read_does_not_renew() -> None:
    clock = ManualClock(1000.0)
    entries = {"t": _entry("t", lease_ms=10_000)}
    lease = RegistryLease(SlowRegistry(clock, {}, 1.0), entries, clock=clock)  # "t" missing
    assert not lease.renew()
    clock.now += 9.5  # 10.5 s after the lease began
    assert not lease.fresh()


class _NoProducer:
    """A producer the lease never needs here (the counts never change)."""

    def partition_count(self, topic: str) -> int:
        raise AssertionError(f"metadata of {topic!r} asked for")


def test_close_wakes_the_renewer_thread_and_waits_until_it_returned() -> None:
    # a renewer that outlived its lease read the registry after its owner closed the
    # clients and stopped the broker (the demo then printed librdkafka errors and "could
    # not refresh the topic registry" after its last line)
    entries = {"t": _entry("t", lease_ms=3_600_000)}  # a renewal every 15 minutes
    reads: list[int] = []

    class Registry:
        def read(self) -> dict[str, TopicEntry]:
            reads.append(1)
            return dict(entries)

    lease = RegistryLease(Registry(), entries, clock=SYSTEM_CLOCK)
    lease.start(_NoProducer())  # type: ignore[arg-type]
    assert [t for t in threading.enumerate() if t.name == "registry-lease"]
    lease.close()
    assert not [t for t in threading.enumerate() if t.name == "registry-lease"]
    assert reads == []  # it stopped in its first wait, without a read
    assert lease.closed()


def test_a_read_failing_as_the_lease_closes_is_not_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock(1000.0)
    entries = {"t": _entry("t")}
    lease = RegistryLease(SlowRegistry(clock, {}, 1.0), entries, clock=clock)  # "t" missing
    with caplog.at_level(logging.DEBUG, logger="framework.growth.lease"):
        assert not lease.renew()
        lease.close()
        assert not lease.renew()
    levels = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert levels == [
        (logging.WARNING, "could not refresh the topic registry: it has no entry for 't'"),
        (logging.DEBUG, "could not refresh the topic registry: it has no entry for 't'"),
    ]
