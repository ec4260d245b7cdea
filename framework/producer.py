"""Placing keys with linear hashing: the partitioner and a producer for users' input topics.

Any writer of an app's input topics must place keys with ``bucket(key_hash(key), N, M)``
(``N`` the topic's initial partition count, ``M`` its current one, from the topic registry);
otherwise a key could land on a partition owned by another processor.

``SplitstateProducer`` holds a *lease* on the counts it places keys with: it re-reads the
registry in the background several times per ``lease_ms`` and refuses to produce (raising
``ProducerLeaseError``) once its last successful read began longer ago than that, rather
than place keys with a count that may be stale. Its delivery timeout is the registry's, and
every record carries the count it was placed with in the ``splitstate.count`` header.
Together these let ``splitstate expand`` know when no record placed with an old count can
still land.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import mmh3
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient

from framework.errors import SplitstateError
from framework.kafka_io import partition_counts
from framework.registry import TopicEntry, TopicRegistry
from rebalance import bucket, level

__all__ = [
    "COUNT_HEADER",
    "LinearHashPartitioner",
    "ProducerLeaseError",
    "RegistryLease",
    "RegistryReader",
    "SplitstateProducer",
]

log = logging.getLogger(__name__)

DeliveryCallback = Callable[[KafkaError | None, Message], None]
#: Header carrying the partition count a record was placed with.
COUNT_HEADER = "splitstate.count"
_RENEWALS_PER_LEASE = 4
_TIMEOUT_SETTINGS = ("delivery.timeout.ms", "message.timeout.ms")


class ProducerLeaseError(SplitstateError):
    """The producer could not re-read the topic registry within its lease."""


class RegistryReader(Protocol):
    """What a lease reads its counts from (``TopicRegistry``)."""

    def read(self) -> dict[str, TopicEntry]:
        """Every registered topic."""
        ...


class LinearHashPartitioner:
    """Partition of a key in a registered topic: ``bucket(key_hash(key), N, M)``."""

    def __init__(self, entries: Mapping[str, TopicEntry]) -> None:
        self._layout: dict[str, tuple[int, int, int]] = {}
        for name, entry in entries.items():
            bucket(0, entry.initial_partitions, entry.partitions)  # validates the layout
            low = entry.initial_partitions << level(entry.initial_partitions, entry.partitions)
            self._layout[name] = (low, entry.partitions - low, entry.partitions)

    def partition(self, topic: str, key: bytes) -> int:
        """The partition ``key`` belongs in: ``bucket(key_hash(key), N, M)``, inlined."""
        try:
            low, split, _count = self._layout[topic]
        except KeyError:
            raise SplitstateError(
                f"topic {topic!r} is not in the splitstate topic registry, so its initial "
                "partition count is unknown. Fix: create it with `splitstate topics create`, "
                "or start the app once, before producing to it."
            ) from None
        h = mmh3.hash(key, 0, False)
        b = h % low
        return h % (low << 1) if b < split else b

    def partitions(self, topic: str) -> int:
        """The partition count keys are placed with."""
        return self._layout[topic][2]

    @property
    def topics(self) -> list[str]:
        """The topics it places keys for."""
        return list(self._layout)


class RegistryLease:
    """Partition counts of ``topics`` held under a lease renewed from the topic registry.

    A background thread re-reads the registry several times per lease and swaps in new
    counts once ``producer``'s metadata shows the new partitions; ``check`` raises
    ``ProducerLeaseError`` when the last renewal is older than the lease. ``delivery_timeout_ms``
    is the registry's: producers using the lease must not retry longer. Without topics there
    is nothing to go stale: the lease never runs out.

    A lease runs from the *start* of the registry read that renewed it (the counts are as of
    then): ``read_at`` is the ``clock`` time taken before ``entries`` were read (default: now).
    ``clock`` is the monotonic clock the lease is measured with.
    """

    def __init__(
        self,
        registry: RegistryReader,
        entries: Mapping[str, TopicEntry],
        clock: Callable[[], float] = time.monotonic,
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
        self._renewed = clock() if read_at is None else read_at
        self._producer: Producer | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name="registry-lease", daemon=True)

    def start(self, producer: Producer) -> None:
        """Start renewing; ``producer``'s metadata is refreshed before new counts are used."""
        self._producer = producer
        if self._topics:
            self._thread.start()

    def fresh(self) -> bool:
        """Whether the counts are within their lease (always, without topics)."""
        return not self._topics or self._clock() - self._renewed <= self.lease_seconds

    def check(self) -> None:
        """Raise ``ProducerLeaseError`` when the counts may be stale."""
        age = self._clock() - self._renewed
        if self._topics and age > self.lease_seconds:
            raise ProducerLeaseError(
                f"the producer could not re-read the splitstate topic registry for {age:.1f}s "
                f"(its lease is {self.lease_seconds:.1f}s), so the partition counts it holds "
                "may be stale and keys could land on the wrong partition; nothing was "
                "produced. Fix: make Kafka reachable; producing works again once the "
                "registry can be read."
            )

    def close(self) -> None:
        """Stop renewing."""
        self._stop.set()

    def _renew(self) -> None:
        while not self._stop.wait(self.lease_seconds / _RENEWALS_PER_LEASE):
            self.renew()

    def renew(self) -> bool:
        """Re-read the registry once (the background thread does this several times per
        lease); returns whether the lease was renewed."""
        started = self._clock()  # the counts read are as of the read's start, not its end
        try:
            entries = self._registry.read()
            partitioner = LinearHashPartitioner({t: entries[t] for t in self._topics})
            for topic in self._topics:
                if partitioner.partitions(topic) != self.partitioner.partitions(topic):
                    self._wait_for_partitions(topic, partitioner.partitions(topic))
        except Exception as error:  # the lease runs out unless a later read works
            log.warning("could not refresh the topic registry: %s", error)
            return False
        if any(partitioner.partitions(t) != self.partitioner.partitions(t) for t in self._topics):
            log.info(
                "partition counts now %s",
                {t: partitioner.partitions(t) for t in self._topics},
            )
        self.partitioner = partitioner
        self._renewed = started
        return True

    def _wait_for_partitions(self, topic: str, count: int) -> None:
        """Refresh librdkafka's metadata until ``topic`` shows ``count`` partitions."""
        assert self._producer is not None
        deadline = time.monotonic() + self.lease_seconds
        while True:
            metadata = self._producer.list_topics(topic, timeout=5)
            if len(metadata.topics[topic].partitions) >= count:
                return
            if time.monotonic() > deadline:
                raise SplitstateError(f"Kafka metadata of {topic!r} lacks the new partitions")
            time.sleep(0.1)


class SplitstateProducer:
    """A confluent-kafka Producer that places keys by linear hashing, under a registry lease.

    ``client``: connection settings (``bootstrap.servers``, security); ``topics``: the topics
    it will write; ``producer_settings``: extra librdkafka producer settings (a delivery
    timeout above the registry's is refused). Topics not yet in the registry are registered
    with their current partition count as ``N``. Call ``close`` when done.
    """

    def __init__(
        self,
        client: Mapping[str, Any],
        topics: list[str],
        producer_settings: Mapping[str, Any] | None = None,
    ) -> None:
        client = dict(client)
        admin = AdminClient(client)
        registry = TopicRegistry(client, admin)
        registry.ensure_topic()
        read_at = time.monotonic()  # the lease runs from before the registry read
        entries = registry.read()
        counts = partition_counts(admin, topics)
        for topic in topics:
            if topic not in entries:
                if topic not in counts:
                    raise SplitstateError(
                        f"topic {topic!r} does not exist. Fix: create it first "
                        "(`splitstate topics create MODULE:APP`)."
                    )
                entries[topic] = registry.register(topic, counts[topic])
        self.lease = RegistryLease(registry, {t: entries[t] for t in topics}, read_at=read_at)
        timeout_ms = self.lease.delivery_timeout_ms
        settings = dict(producer_settings or {})
        for name in _TIMEOUT_SETTINGS:
            if name in settings and int(settings[name]) > timeout_ms:
                raise SplitstateError(
                    f"producer setting {name}={settings[name]} exceeds the topic registry's "
                    f"delivery timeout ({timeout_ms} ms) that `splitstate expand` waits for. "
                    f"Fix: use at most {timeout_ms}, or leave it out."
                )
        self._producer = Producer(
            {
                **client,
                "enable.idempotence": True,
                "linger.ms": 5,
                "delivery.timeout.ms": timeout_ms,
                **settings,
            }
        )
        self.lease.start(self._producer)

    @property
    def partitioner(self) -> LinearHashPartitioner:
        """The counts keys are placed with now."""
        return self.lease.partitioner

    def check_lease(self) -> None:
        """Raise ``ProducerLeaseError`` when the counts may be stale."""
        self.lease.check()

    def produce(
        self,
        topic: str,
        key: bytes,
        value: bytes | None,
        headers: list[tuple[str, str | bytes | None]] | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> None:
        """Queue one keyed record for the partition its key hashes to.

        While the local queue is full it waits for room; after each wait the lease is checked
        again and the key placed again with the counts held then (they may have changed).
        """
        while True:
            self.lease.check()
            partitioner = self.lease.partitioner
            partition = partitioner.partition(topic, key)
            placed = [*(headers or []), (COUNT_HEADER, str(partitioner.partitions(topic)))]
            try:
                self._producer.produce(
                    topic,
                    key=key,
                    value=value,
                    partition=partition,
                    headers=placed,
                    on_delivery=on_delivery,
                )
                return
            except BufferError:
                self._producer.poll(0.1)  # the local queue is full: let deliveries drain

    def poll(self, timeout: float = 0.0) -> int:
        """Serve delivery callbacks."""
        return self._producer.poll(timeout)

    def flush(self, timeout: float = 30.0) -> int:
        """Wait for every queued record; returns how many are still queued."""
        return self._producer.flush(timeout)

    def close(self, timeout: float = 30.0) -> int:
        """Flush and stop renewing the lease; returns how many records are still queued."""
        self.lease.close()
        return self._producer.flush(timeout)
