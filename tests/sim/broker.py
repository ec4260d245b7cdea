"""The simulated cluster's state: topics of partitioned logs, consumer groups' offsets.

Pure, deterministic Python: no threads, no time of its own (timestamps come from the clock
of whoever writes). The adversary acts on it directly: ``compact`` a compacted topic (the
last record of each key survives, offsets never change, gaps appear as in Kafka) and
``delete_before`` an offset (retention deleting a prefix).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from framework.kafka import KafkaIOError, UnknownPartitionError
from rebalance.positions import Position

__all__ = ["DEFAULT_CONFIGS", "MAX_MESSAGE_BYTES", "Broker", "Partition", "StoredRecord", "Topic"]

#: The broker's ``message.max.bytes`` (Kafka's default, about 1 MiB).
MAX_MESSAGE_BYTES = 1_048_588
#: What ``describe_configs`` reports for a topic created without these configs.
DEFAULT_CONFIGS: dict[str, str] = {
    "cleanup.policy": "delete",
    "retention.ms": "604800000",
    "retention.bytes": "-1",
    "max.message.bytes": str(MAX_MESSAGE_BYTES),
    "min.insync.replicas": "1",
}


@dataclass(frozen=True)
class StoredRecord:
    """One record of a partition's log; ``origin`` names the process that wrote it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int
    origin: str

    @property
    def size(self) -> int:
        """Bytes of key, value and headers."""
        headers = sum(len(name) + len(value or b"") for name, value in self.headers)
        return len(self.key or b"") + len(self.value or b"") + headers


@dataclass
class Partition:
    """A log: records in offset order (with gaps after compaction) from ``start``."""

    records: list[StoredRecord] = field(default_factory=list)
    start: int = 0
    end: int = 0

    def from_offset(self, offset: int, limit: int) -> list[StoredRecord]:
        """Up to ``limit`` records at or after ``offset``."""
        if not self.records or offset >= self.end:
            return []
        low, high = 0, len(self.records)
        while low < high:  # the first record with an offset >= offset
            middle = (low + high) // 2
            if self.records[middle].offset < offset:
                low = middle + 1
            else:
                high = middle
        return self.records[low : low + limit]


@dataclass
class Topic:
    """A topic: partitions, configs and an id."""

    name: str
    partitions: list[Partition]
    configs: dict[str, str]
    topic_id: uuid.UUID


class Broker:
    """One simulated Kafka cluster."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.topics: dict[str, Topic] = {}
        #: group id -> position -> committed next offset
        self.groups: dict[str, dict[Position, int]] = {}
        #: every record ever written to each topic (compaction and retention delete from the
        #: logs, not from here: the checks' truth)
        self.ledger: dict[str, list[StoredRecord]] = {}
        #: processes (``name#incarnation``) some of whose records timed out in their
        #: producer's queue (a later record of theirs may have landed before the retry)
        self.expired_origins: set[str] = set()
        #: the background sender of each producer holding records it could not send yet, run
        #: at every call of any process (as librdkafka's thread sends what is queued whenever
        #: the broker is reachable), by the producer's id
        self.senders: dict[int, Callable[[], None]] = {}
        #: transactional id -> the epoch of its newest producer (older ones are fenced)
        self.transactional_epochs: dict[str, int] = {}
        #: called with every record written (the adversary reacts to protocol steps)
        self.watchers: list[Callable[[StoredRecord], None]] = []
        #: called with a process's name, the consumer's name and the records each of its
        #: consumers' fetches got
        self.fetch_watchers: list[Callable[[str, str, list[StoredRecord]], None]] = []

    # -- topics --------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> bool:
        """Create ``name`` unless it exists; whether it was created."""
        if name in self.topics:
            return False
        if partitions < 1:
            raise KafkaIOError(f"could not create topic {name!r}: partitions must be >= 1")
        topic_id = uuid.UUID(int=self.rng.getrandbits(128), version=4)
        self.topics[name] = Topic(
            name,
            [Partition() for _ in range(partitions)],
            {**DEFAULT_CONFIGS, **configs},
            topic_id,
        )
        return True

    def topic(self, name: str) -> Topic:
        """Topic ``name``; ``UnknownPartitionError`` when it does not exist."""
        try:
            return self.topics[name]
        except KeyError:
            raise UnknownPartitionError(f"Broker: Unknown topic or partition: {name}") from None

    def partition(self, position: Position) -> Partition:
        """The log of ``position``; ``UnknownPartitionError`` when it does not exist."""
        name, index = position
        topic = self.topic(name)
        if not 0 <= index < len(topic.partitions):
            raise UnknownPartitionError(f"Broker: Unknown topic or partition: {name}[{index}]")
        return topic.partitions[index]

    def partition_count(self, name: str) -> int:
        """``name``'s partition count (0 when it does not exist)."""
        topic = self.topics.get(name)
        return 0 if topic is None else len(topic.partitions)

    def grow(self, name: str, count: int) -> None:
        """Grow topic ``name`` to ``count`` partitions (Kafka refuses to shrink or stay)."""
        topic = self.topic(name)
        if count <= len(topic.partitions):
            raise KafkaIOError(
                f"Topic {name!r} already has {len(topic.partitions)} partitions; "
                f"cannot grow it to {count}"
            )
        topic.partitions += [Partition() for _ in range(count - len(topic.partitions))]

    # -- records -------------------------------------------------------------------------

    def limit(self, name: str) -> int:
        """The largest record ``name`` accepts."""
        topic = self.topic(name)
        configured = int(topic.configs.get("max.message.bytes", MAX_MESSAGE_BYTES))
        return min(MAX_MESSAGE_BYTES, configured)

    def append(self, position: Position, record: dict[str, Any]) -> StoredRecord:
        """Write one record at the end of ``position`` (fields of ``StoredRecord`` but the
        position and offset)."""
        log = self.partition(position)
        stored = StoredRecord(position[0], position[1], log.end, **record)
        log.records.append(stored)
        log.end += 1
        self.ledger.setdefault(position[0], []).append(stored)
        for watcher in self.watchers:
            watcher(stored)
        return stored

    def records(self, name: str, partition: int) -> list[StoredRecord]:
        """Every record ``name[partition]`` still holds."""
        return list(self.partition((name, partition)).records)

    def end_offset(self, name: str, partition: int) -> int:
        """The offset the next record of ``name[partition]`` gets."""
        return self.partition((name, partition)).end

    # -- the adversary -------------------------------------------------------------------

    def compact(self, name: str, rng: random.Random) -> None:
        """Kafka's log cleaner on topic ``name`` (if compacted): in a prefix of each log, a
        record is removed when a later record has its key; tombstones may go too."""
        topic = self.topics.get(name)
        if topic is None or "compact" not in topic.configs.get("cleanup.policy", ""):
            return
        for log in topic.partitions:
            if not log.records:
                continue
            cut = rng.randint(log.start, log.end)
            last: dict[bytes | None, int] = {}
            for record in log.records:
                last[record.key] = record.offset
            kept = []
            for record in log.records:
                cleanable = record.offset < cut
                superseded = last[record.key] != record.offset
                tombstone = record.value is None and rng.random() < 0.5
                if cleanable and (superseded or tombstone):
                    continue
                kept.append(record)
            log.records = kept

    def delete_before(self, name: str, partition: int, offset: int) -> None:
        """Retention: records of ``name[partition]`` below ``offset`` are gone."""
        log = self.partition((name, partition))
        log.start = max(log.start, min(offset, log.end))
        log.records = [r for r in log.records if r.offset >= log.start]
