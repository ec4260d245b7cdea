"""The producer lease: partition counts held only while the topic registry can be re-read.

A writer of an app's input (``SplitstateProducer``, or a processor's outputs) places keys with
the counts its lease holds. The lease is renewed from the registry several times per
``lease_ms`` in the background (a thread of the ``Clock``) and runs out when no read
succeeded for that long, so a growth (``splitstate expand``) knows when no record placed with
an old count can still land. ``close`` stops the renewer and waits for it, so it never reads
the registry after its owner closed the clients (or stopped the broker).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Protocol

from framework.clock import SYSTEM_CLOCK, Clock, StopSignal, Task
from framework.coordination.registry import RegistryEntries, RegistryRecordError, TopicEntry
from framework.errors import SplitstateError
from framework.growth.placement import LinearHashPartitioner
from framework.kafka import KafkaProducer

__all__ = ["ProducerLeaseError", "RegistryLease", "RegistryReader"]

log = logging.getLogger(__name__)

_RENEWALS_PER_LEASE = 4


class ProducerLeaseError(SplitstateError):
    """The producer could not re-read the topic registry within its lease."""


class RegistryReader(Protocol):
    """What a lease reads its counts from (``TopicRegistry``)."""

    def read(self) -> RegistryEntries | Mapping[str, TopicEntry]:
        """Every registered topic."""
        ...


class RegistryLease:
    """Partition counts of ``topics`` held under a lease renewed from the topic registry.

    Background work of ``clock`` re-reads the registry several times per lease and swaps in new
    counts once ``producer``'s metadata shows the new partitions; ``check`` raises
    ``ProducerLeaseError`` when the last renewal is older than the lease. ``delivery_timeout_ms``
    is the registry's: producers using the lease must not retry longer. Without topics there
    is nothing to go stale: the lease never runs out.

    A lease runs from the *start* of the registry read that renewed it (the counts are as of
    then): ``read_at`` is the ``clock`` time taken before ``entries`` were read (default: now).
    ``clock`` measures the lease and runs the renewals (``SYSTEM_CLOCK``: a daemon thread).
    """

    def __init__(
        self,
        registry: RegistryReader,
        entries: Mapping[str, TopicEntry],
        clock: Clock = SYSTEM_CLOCK,
        read_at: float | None = None,
    ) -> None:
        self._registry = registry
        self._clock = clock
        self._topics = list(entries)
        self.partitioner = LinearHashPartitioner(entries)
        self.lease_seconds = (
            min(e.lease_ms for e in entries.values()) / 1000 if entries else math.inf
        )
        self.delivery_timeout_ms = min(
            (e.delivery_timeout_ms for e in entries.values()), default=30_000
        )
        self._renewed = clock.monotonic() if read_at is None else read_at
        #: why the last renewal failed (``None`` once one worked)
        self._failure: Exception | None = None
        self._producer: KafkaProducer | None = None
        self._closed = StopSignal()
        self._renewer: Task | None = None

    def start(self, producer: KafkaProducer) -> None:
        """Start renewing; ``producer``'s metadata is refreshed before new counts are used."""
        self._producer = producer
        if self._topics:
            self._renewer = self._clock.start("registry-lease", self._renew)

    def fresh(self) -> bool:
        """Whether the counts are within their lease (always, without topics)."""
        return not self._topics or self._clock.monotonic() - self._renewed <= self.lease_seconds

    def age(self) -> float:
        """Seconds since the counts were read (the lease runs from the read's start)."""
        return self._clock.monotonic() - self._renewed

    def check(self) -> None:
        """Raise ``ProducerLeaseError`` when the counts may be stale."""
        age = self._clock.monotonic() - self._renewed
        if self._topics and age > self.lease_seconds:
            failure = self._failure
            fix = (
                f"The registry was read, but {failure}"
                if isinstance(failure, RegistryRecordError)
                else "Fix: make Kafka reachable; producing works again once the registry can "
                "be read."
            )
            raise ProducerLeaseError(
                f"the producer could not re-read the splitstate topic registry for {age:.1f}s "
                f"(its lease is {self.lease_seconds:.1f}s), so the partition counts it holds "
                f"may be stale and keys could land on the wrong partition; nothing was "
                f"produced. {fix}"
            )

    def close(self, timeout: float = 30.0) -> None:
        """Stop renewing and wait (up to ``timeout`` seconds) until the renewer returned: its
        wait between renewals ends at once, a registry read under way finishes, a wait for
        new partitions ends unused, and no other read starts. Close the lease before the
        clients it reads with (and the producer it was started with)."""
        self._closed.set()
        renewer, self._renewer = self._renewer, None
        if renewer is not None:
            renewer.join(timeout)
        self._producer = None  # the lease holds it no longer

    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._closed.is_set()

    def _renew(self) -> None:
        # checked after every wait (also one inside a renewal), so a closed lease stops
        while not self.closed():
            if self._clock.wait(self._closed, self.lease_seconds / _RENEWALS_PER_LEASE):
                return
            self.renew()

    def renew(self) -> bool:
        """Re-read the registry once (the background thread does this several times per
        lease); returns whether the lease was renewed."""
        started = self._clock.monotonic()  # the counts read are as of the read's start, not its end
        try:
            entries = self._registry.read()
            missing = [t for t in self._topics if t not in entries]
            if missing:
                raise SplitstateError(f"it has no entry for {', '.join(map(repr, missing))}")
            partitioner = LinearHashPartitioner({t: entries[t] for t in self._topics})
            for topic in self._topics:
                if partitioner.partitions(topic) != self.partitioner.partitions(topic):
                    self._wait_for_partitions(topic, partitioner.partitions(topic))
        except _ClosedError:
            return False
        except Exception as error:  # the lease runs out unless a later read works
            self._failure = error
            # (a read that failed as the lease was being closed concerns no one)
            log.log(
                logging.DEBUG if self.closed() else logging.WARNING,
                "could not refresh the topic registry: %s",
                error,
            )
            return False
        if any(partitioner.partitions(t) != self.partitioner.partitions(t) for t in self._topics):
            log.info(
                "partition counts now %s",
                {t: partitioner.partitions(t) for t in self._topics},
            )
        self.partitioner = partitioner
        self._renewed = started
        self._failure = None
        return True

    def _wait_for_partitions(self, topic: str, count: int) -> None:
        """Refresh librdkafka's metadata until ``topic`` shows ``count`` partitions."""
        if self._producer is None:  # closed meanwhile
            raise _ClosedError
        deadline = self._clock.monotonic() + self.lease_seconds
        while True:
            if self._producer.partition_count(topic) >= count:
                return
            if self._clock.monotonic() > deadline:
                raise SplitstateError(f"Kafka metadata of {topic!r} lacks the new partitions")
            self._clock.sleep(0.1)
            if self.closed():
                raise _ClosedError


class _ClosedError(Exception):
    """The lease was closed while a renewal waited."""
