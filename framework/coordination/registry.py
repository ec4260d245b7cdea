"""The topic registry: facts every producer and app must share about a topic.

One compacted topic per cluster, ``__splitstate_topics``, keyed by topic name. Each value is
JSON: the topic's initial partition count ``N``, its partition-count history, the thresholds
of its growths, the key hash, the producers' lease and delivery timeout, and a growth in
progress (``splitstate expand``). The last record of a topic wins (as compaction keeps it).
The topic is created compacted with ``retention.ms=-1`` and ``retention.bytes=-1``; apps,
``scale`` and ``expand`` refuse to run while its config would delete records
(``framework.kafka.check_retention``).

Producers place keys with the last count and must re-read the registry within ``lease_ms``;
a record placed with an older count is delivered (or failed) within ``delivery_timeout_ms``.
So ``lease_ms + delivery_timeout_ms`` after a new count is recorded, no record placed with the
old count can still land, and the growth's markers can fence the parents.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from framework.kafka import COMPACTED, Kafka, TopicSpec
from rebalance import TopicHistory

__all__ = [
    "DEFAULT_DELIVERY_TIMEOUT_MS",
    "DEFAULT_LEASE_MS",
    "REGISTRY_TOPIC",
    "Growth",
    "TopicEntry",
    "TopicRegistry",
]

REGISTRY_TOPIC = "__splitstate_topics"


#: How long a producer may place keys with the count it last read from the registry.
DEFAULT_LEASE_MS = 10_000
#: The longest a producer may keep trying to deliver a record (librdkafka delivery.timeout.ms).
DEFAULT_DELIVERY_TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class Growth:
    """A growth of the topic to ``partitions`` in progress (each step resumable).

    ``recorded_ms``: when the new count was recorded (producers switch within their lease);
    ``fence_ends``: each parent's end offset once no old-count record can land any more
    (markers are written at or after it); ``markers``: child -> its marker's offset, as
    written so far.
    """

    partitions: int
    recorded_ms: int
    fence_ends: Mapping[int, int] | None = None
    markers: Mapping[int, int] = field(default_factory=dict)

    def to_record(self) -> dict[str, Any]:
        """JSON-able values."""
        return {
            "partitions": self.partitions,
            "recorded_ms": self.recorded_ms,
            "fence_ends": None
            if self.fence_ends is None
            else {str(k): v for k, v in sorted(self.fence_ends.items())},
            "markers": {str(k): v for k, v in sorted(self.markers.items())},
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Growth:
        """Parse :meth:`to_record`'s output."""
        ends = record.get("fence_ends")
        return cls(
            int(record["partitions"]),
            int(record["recorded_ms"]),
            None if ends is None else {int(k): int(v) for k, v in ends.items()},
            {int(k): int(v) for k, v in dict(record.get("markers", {})).items()},
        )


@dataclass(frozen=True)
class TopicEntry:
    """What the registry knows about one topic."""

    history: TopicHistory
    key_hash: str = "murmur3"
    lease_ms: int = DEFAULT_LEASE_MS
    delivery_timeout_ms: int = DEFAULT_DELIVERY_TIMEOUT_MS
    growth: Growth | None = None

    @property
    def fence_ms(self) -> int:
        """How long after a new count is recorded old-count records may still land."""
        return self.lease_ms + self.delivery_timeout_ms

    def pending(self) -> list[int]:
        """Partitions created by a growth whose threshold is not recorded yet (blocked)."""
        history = self.history
        return [
            p
            for p in range(history.initial_partitions, history.partitions)
            if p not in history.thresholds
        ]

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
            "lease_ms": self.lease_ms,
            "delivery_timeout_ms": self.delivery_timeout_ms,
            "growth": None if self.growth is None else self.growth.to_record(),
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> TopicEntry:
        """Parse a registry record."""
        history = TopicHistory.of(
            str(record["topic"]),
            [int(c) for c in record["counts"]],
            {int(k): int(v) for k, v in dict(record.get("thresholds", {})).items()},
        )
        growth = record.get("growth")
        return cls(
            history,
            str(record.get("key_hash", "murmur3")),
            int(record.get("lease_ms", DEFAULT_LEASE_MS)),
            int(record.get("delivery_timeout_ms", DEFAULT_DELIVERY_TIMEOUT_MS)),
            None if growth is None else Growth.from_record(growth),
        )


class TopicRegistry:
    """Read and write the cluster's topic registry, through ``kafka``."""

    def __init__(self, kafka: Kafka) -> None:
        self._kafka = kafka

    @staticmethod
    def topic_spec() -> TopicSpec:
        """The registry topic: one partition, compacted, never deleting records."""
        return TopicSpec(REGISTRY_TOPIC, 1, config=COMPACTED)

    def ensure_topic(self) -> None:
        """Create the registry topic when missing (compacted, never deleting records)."""
        self._kafka.create_topics([self.topic_spec()])

    def read(self) -> dict[str, TopicEntry]:
        """Every registered topic."""
        entries: dict[str, TopicEntry] = {}
        for _offset, key, value in self._kafka.read_log(REGISTRY_TOPIC):
            if key is None:
                continue
            if value is None:
                entries.pop(key.decode(), None)
            else:
                entries[key.decode()] = TopicEntry.from_record(orjson.loads(value))
        return entries

    def write(self, entry: TopicEntry) -> None:
        """Record ``entry`` (replacing what was known about its topic)."""
        self.write_all([entry])

    def write_all(self, entries: Sequence[TopicEntry]) -> None:
        """Record ``entries`` in one append, in order (each replacing what was known)."""
        if entries:
            self._kafka.append(
                REGISTRY_TOPIC, [(e.topic.encode(), orjson.dumps(e.to_record())) for e in entries]
            )

    def register(
        self,
        topic: str,
        partitions: int,
        key_hash: str = "murmur3",
        lease_ms: int = DEFAULT_LEASE_MS,
        delivery_timeout_ms: int = DEFAULT_DELIVERY_TIMEOUT_MS,
    ) -> TopicEntry:
        """The registered entry of ``topic``, registering it with ``partitions`` if new."""
        history = TopicHistory.of(topic, [partitions])
        entry = TopicEntry(history, key_hash, lease_ms, delivery_timeout_ms)
        return self.register_all([entry])[topic]

    def register_all(self, entries: Sequence[TopicEntry]) -> dict[str, TopicEntry]:
        """Each topic's registered entry, registering those of ``entries`` whose topic is
        new: one read of the registry, then one append of the new ones."""
        known = self.read()
        found = {e.topic: known.get(e.topic, e) for e in entries}
        self.write_all([e for e in entries if e.topic not in known])
        return found
