"""The topic registry: facts every producer and app must share about a topic.

One compacted topic per cluster, ``__splitstate_topics``, keyed by topic name. Each value is
JSON: the topic's initial partition count ``N``, its partition-count history, the thresholds
of its growths and the key hash. The last record of a topic wins (as compaction keeps it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from framework.kafka_io import COMPACTED, TopicSpec, append, ensure_topics, read_log
from rebalance import TopicHistory

__all__ = ["REGISTRY_TOPIC", "TopicEntry", "TopicRegistry"]

REGISTRY_TOPIC = "__splitstate_topics"


@dataclass(frozen=True)
class TopicEntry:
    """What the registry knows about one topic."""

    history: TopicHistory
    key_hash: str = "murmur3"

    @property
    def topic(self) -> str:
        """The topic's name."""
        return self.history.name

    @property
    def initial_partitions(self) -> int:
        """``N``."""
        return self.history.initial_partitions

    @property
    def partitions(self) -> int:
        """``M``, the count producers place keys with."""
        return self.history.partitions

    def to_record(self) -> dict[str, Any]:
        """The registry record."""
        return {
            "topic": self.topic,
            "initial_partitions": self.initial_partitions,
            "counts": list(self.history.counts),
            "thresholds": {str(k): v for k, v in sorted(self.history.thresholds.items())},
            "key_hash": self.key_hash,
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> TopicEntry:
        """Parse a registry record."""
        history = TopicHistory.of(
            str(record["topic"]),
            [int(c) for c in record["counts"]],
            {int(k): int(v) for k, v in dict(record.get("thresholds", {})).items()},
        )
        return cls(history, str(record.get("key_hash", "murmur3")))


class TopicRegistry:
    """Read and write the cluster's topic registry."""

    def __init__(self, client: Mapping[str, Any], admin: AdminClient) -> None:
        self._client = dict(client)
        self._admin = admin

    def ensure_topic(self) -> None:
        """Create the registry topic when missing."""
        ensure_topics(self._admin, [TopicSpec(REGISTRY_TOPIC, 1, config=COMPACTED)])

    def read(self) -> dict[str, TopicEntry]:
        """Every registered topic."""
        entries: dict[str, TopicEntry] = {}
        for key, value in read_log(self._client, REGISTRY_TOPIC):
            if key is None:
                continue
            if value is None:
                entries.pop(key.decode(), None)
            else:
                entries[key.decode()] = TopicEntry.from_record(orjson.loads(value))
        return entries

    def write(self, entry: TopicEntry) -> None:
        """Record ``entry`` (replacing what was known about its topic)."""
        producer = Producer({**self._client, "enable.idempotence": True})
        append(producer, REGISTRY_TOPIC, [(entry.topic.encode(), orjson.dumps(entry.to_record()))])

    def register(self, topic: str, partitions: int, key_hash: str = "murmur3") -> TopicEntry:
        """The registered entry of ``topic``, registering it with ``partitions`` if new."""
        known = self.read().get(topic)
        if known is not None:
            return known
        entry = TopicEntry(TopicHistory.of(topic, [partitions]), key_hash)
        self.write(entry)
        return entry
