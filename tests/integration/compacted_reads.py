"""Reading topics in integration tests (compacted ones too): every record committed or decided
in the log now, and keys a growth moves."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from rebalance import bucket, key_hash
from tests.integration.harness import consume_ready, unique

#: a compacted topic whose log cleaner runs soon after each write
FAST_COMPACTION = {
    "cleanup.policy": "compact",
    "segment.ms": "100",
    "min.cleanable.dirty.ratio": "0.01",
    "min.compaction.lag.ms": "0",
    "delete.retention.ms": "500",
}


class Read:
    """One record as read back: where it is, its key, value and headers."""

    def __init__(self, message: Any) -> None:
        self.partition: int = message.partition()
        self.offset: int = message.offset()
        self.key: bytes | None = message.key()
        self.value: bytes | None = message.value()
        #: every header as written, a header without a value too
        self.header_list: list[tuple[str, bytes | None]] = list(message.headers() or [])
        self.headers: dict[str, bytes] = {
            name: value for name, value in self.header_list if isinstance(value, bytes)
        }
        self.timestamp: int = message.timestamp()[1]

    def __repr__(self) -> str:
        return f"[{self.partition}]@{self.offset} {self.key!r}={self.value!r} {self.headers}"


def log_ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """Each partition's log end now: its high watermark. A read_uncommitted view gives it;
    a read_committed one gives the last stable offset, which stands before any transaction
    not decided yet, or decided but whose markers Kafka has not written yet."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("ends"),
            "isolation.level": "read_uncommitted",
        }
    )
    try:
        ends: dict[int, int] = {}
        for p in range(partitions):
            found = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            assert found is not None, f"no watermarks of {topic} [{p}] in 10 s"
            ends[p] = found[1]
        return ends
    finally:
        consumer.close()


def read_topic(bootstrap: str, topic: str, partitions: int) -> list[Read]:
    """Every committed record of ``topic``'s log as it is now, in offset order per partition.

    It reads read_committed up to each partition's log end (``log_ends``): a read_committed
    consumer's position passes a transaction's records (and aborted ones, and markers) only
    once its markers are written, so a transaction that ``commit_transaction`` just ended is
    waited for, not cut off at the last stable offset. Fails if that takes over a minute."""
    ends = log_ends(bootstrap, topic, partitions)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("read"),
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        found: list[Read] = []
        reached = dict.fromkeys(ends, 0)
        deadline = time.monotonic() + 60
        while behind := {p: end for p, end in ends.items() if reached[p] < end}:
            assert time.monotonic() < deadline, (
                f"read_topic: {topic} stayed short of its log ends in 60 s: "
                f"reached {reached}, ends {behind} (a transaction left open?)"
            )
            for message in consume_ready(consumer, 5000, 0.5):
                if message.error() is None:
                    found.append(Read(message))
            for position in consumer.position([TopicPartition(topic, p) for p in ends]):
                reached[position.partition] = max(reached[position.partition], position.offset)
        return found
    finally:
        consumer.close()


def keys_moving(initial: int, counts: list[int], how_many: int) -> list[bytes]:
    """Keys whose partition differs between the first and the last of ``counts``."""
    found = []
    for i in range(100_000):
        key = f"user-{i}".encode()
        h = key_hash(key)
        if bucket(h, initial, counts[0]) != bucket(h, initial, counts[-1]):
            found.append(key)
            if len(found) == how_many:
                return found
    raise AssertionError("not enough keys")
