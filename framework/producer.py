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
from collections.abc import Mapping
from typing import Any

from framework.coordination.registry import TopicEntry, TopicRegistry
from framework.errors import SplitstateError
from framework.growth.compaction_writes import DEFAULT_TOMBSTONES_CACHED, CompactionTombstones
from framework.growth.lease import RegistryLease
from framework.growth.placement import LinearHashPartitioner, produce_placed
from framework.kafka import Clients, DeliveryCallback, Kafka
from framework.processing import encode_input

__all__ = ["SplitstateProducer"]

log = logging.getLogger(__name__)

_TIMEOUT_SETTINGS = ("delivery.timeout.ms", "message.timeout.ms")


class SplitstateProducer:
    """A Kafka producer that places keys by linear hashing, under a registry lease.

    ``client``: connection settings (``bootstrap.servers``, security), or a ``Kafka`` port
    (``framework.kafka``); ``topics``: the topics it will write; ``producer_settings``: extra
    librdkafka producer settings (a delivery timeout above the registry's is refused). Topics
    not yet in the registry are registered with their current partition count as ``N``.
    For a compacted topic whose count changed, a record also writes compaction tombstones to
    its key's earlier partitions (``framework.growth.compaction_writes``), once per key and
    count for the last ``compaction_tombstones_cached`` keys. Call ``close`` when done.
    """

    def __init__(
        self,
        client: Mapping[str, Any] | Kafka,
        topics: list[str],
        producer_settings: Mapping[str, Any] | None = None,
        *,
        compaction_tombstones_cached: int = DEFAULT_TOMBSTONES_CACHED,
    ) -> None:
        self._tombstones = CompactionTombstones(compaction_tombstones_cached)
        kafka = Clients(client) if isinstance(client, Mapping) else client
        #: the port this producer made itself (and closes with it)
        self._own_kafka = kafka if isinstance(client, Mapping) else None
        registry = TopicRegistry(kafka)
        registry.ensure_topic()
        read_at = kafka.clock.monotonic()  # the lease runs from before the registry read
        known = registry.read()
        counts = kafka.partition_counts(topics)
        entries: dict[str, TopicEntry] = {}
        for topic in topics:
            if topic in known:
                entries[topic] = known[topic]
                continue
            if topic not in counts:
                raise SplitstateError(
                    f"topic {topic!r} does not exist. Fix: create it first "
                    "(`splitstate topics create MODULE:APP`)."
                )
            entries[topic] = registry.register(topic, counts[topic])
        self.lease = RegistryLease(registry, entries, kafka.clock, read_at=read_at)
        timeout_ms = self.lease.delivery_timeout_ms
        settings = dict(producer_settings or {})
        for name in _TIMEOUT_SETTINGS:
            if name in settings and int(settings[name]) > timeout_ms:
                raise SplitstateError(
                    f"producer setting {name}={settings[name]} exceeds the topic registry's "
                    f"delivery timeout ({timeout_ms} ms) that `splitstate expand` waits for. "
                    f"Fix: use at most {timeout_ms}, or leave it out."
                )
        self._producer = kafka.producer(
            linger_ms=5, delivery_timeout_ms=timeout_ms, settings=settings
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
        value: Any,
        headers: list[tuple[str, str | bytes | None]] | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> None:
        """Queue one keyed record for the partition its key hashes to. ``value`` is encoded as
        ``Output`` values are: bytes as they are, text as UTF-8, a pydantic model or any
        JSON-able value as JSON (``TypeError`` naming the fix for anything else).

        ``on_delivery(error, message)`` is called from ``poll``/``flush`` once Kafka took the
        record (``error`` is ``None``) or refused it (a ``framework.kafka.DeliveryError``);
        also, with the error, for a compaction tombstone of the record Kafka refused (its
        ``message`` has a ``splitstate.compaction`` header and no value): send the record
        again, or the key's older value may outlive compaction in its earlier partition.
        While the local queue is full it waits for room; after each wait the lease is checked
        again and the key placed again with the counts held then (they may have changed).
        Raises ``ProducerLeaseError`` when the counts may be stale, and
        ``framework.kafka.KafkaIOError`` (``RecordTooLargeError``) when Kafka refuses it.
        """
        produce_placed(
            self._producer,
            self._checked,
            topic,
            key,
            encode_input(value, f"produce to {topic!r}"),
            headers=headers,
            on_delivery=on_delivery,
            tombstones=self._tombstones,
        )

    def _checked(self) -> LinearHashPartitioner:
        self.lease.check()
        return self.lease.partitioner

    def poll(self, timeout: float = 0.0) -> int:
        """Serve delivery callbacks."""
        return self._producer.poll(timeout)

    def flush(self, timeout: float = 30.0) -> int:
        """Wait for every queued record; returns how many are still queued."""
        return self._producer.flush(timeout)

    def close(self, timeout: float = 30.0) -> int:
        """Stop renewing the lease (its renewer returns first), flush, then close the producer
        and the clients this producer made; returns how many records were still queued (and
        are dropped). Nothing of it reaches Kafka afterwards: close it before Kafka stops."""
        self.lease.close(timeout)
        try:
            remaining = self._producer.flush(timeout)
        finally:
            self._producer.close()
            if self._own_kafka is not None:
                self._own_kafka.close()
        return remaining
