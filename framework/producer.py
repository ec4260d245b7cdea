"""Placing keys with linear hashing: the partitioner and a producer for users' input topics.

Any writer of an app's input topics must place keys with ``bucket(key_hash(key), N, M)``
(``N`` the topic's initial partition count, ``M`` its current one, from the topic registry);
otherwise a key could land on a partition owned by another processor.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import mmh3
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient

from framework.errors import SplitstateError
from framework.kafka_io import partition_counts
from framework.registry import TopicEntry, TopicRegistry
from rebalance import bucket, level

__all__ = ["LinearHashPartitioner", "SplitstateProducer"]

DeliveryCallback = Callable[[KafkaError | None, Message], None]


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


class SplitstateProducer:
    """A confluent-kafka Producer that places keys by linear hashing.

    ``client``: connection settings (``bootstrap.servers``, security); ``topics``: the topics
    it will write; ``producer_settings``: extra librdkafka producer settings. Topics not yet
    in the registry are registered with their current partition count as ``N``.
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
        self.partitioner = LinearHashPartitioner(entries)
        self._producer = Producer(
            {**client, "enable.idempotence": True, "linger.ms": 5, **(producer_settings or {})}
        )

    def produce(
        self,
        topic: str,
        key: bytes,
        value: bytes | None,
        headers: list[tuple[str, str | bytes | None]] | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> None:
        """Queue one keyed record for the partition its key hashes to."""
        partition = self.partitioner.partition(topic, key)
        while True:
            try:
                self._producer.produce(
                    topic,
                    key=key,
                    value=value,
                    partition=partition,
                    headers=headers,
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
