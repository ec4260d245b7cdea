"""The largest record each output topic takes, to keep a refusal out of a transaction.

Inside a Kafka transaction a record the broker refuses for size fails the whole transaction,
so under exactly-once a record that cannot fit is found before it is produced: its size as
Kafka frames it alone in a record batch (v2: a 61-byte batch header, at most 36 bytes of
record framing, at most 10 per header, uncompressed) against the topic's
``max.message.bytes``. The producer's ``batch.size`` is kept below the smallest limit, so
that records that each fit are never refused together either.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from framework.kafka import Header, Kafka

__all__ = ["DEFAULT_TOPIC_LIMIT", "RecordLimits", "framed_size"]

#: Kafka's default ``max.message.bytes`` of a topic
DEFAULT_TOPIC_LIMIT = 1_048_588
_BATCH_HEADER = 61
_RECORD_FRAMING = 36
_HEADER_FRAMING = 10
#: librdkafka's default ``batch.size``
_PRODUCER_BATCH = 1_000_000


def framed_size(key: bytes | None, value: bytes | None, headers: Sequence[Header]) -> int:
    """The most bytes a record takes alone in an uncompressed record batch."""
    size = _BATCH_HEADER + _RECORD_FRAMING + len(key or b"") + len(value or b"")
    for name, raw in headers:
        data = raw.encode() if isinstance(raw, str) else (raw or b"")
        size += _HEADER_FRAMING + len(name.encode()) + len(data)
    return size


class RecordLimits:
    """Each topic's ``max.message.bytes`` as Kafka reported it when the run began."""

    def __init__(self, limits: dict[str, int]) -> None:
        self._limits = dict(limits)

    @classmethod
    def read(cls, kafka: Kafka, topics: Iterable[str]) -> RecordLimits:
        """The limits of ``topics`` (Kafka's default for a topic that reports none)."""
        names = sorted(set(topics))
        configs = kafka.topic_configs(names)
        limits = {}
        for name in names:
            raw = configs.get(name, {}).get("max.message.bytes")
            limits[name] = int(raw) if raw else DEFAULT_TOPIC_LIMIT
        return cls(limits)

    def limit(self, topic: str) -> int:
        """The largest record batch ``topic`` takes."""
        return self._limits.get(topic, DEFAULT_TOPIC_LIMIT)

    def fits(
        self, topic: str, key: bytes | None, value: bytes | None, headers: Sequence[Header]
    ) -> bool:
        """Whether the record fits ``topic`` alone in a batch."""
        return framed_size(key, value, headers) <= self.limit(topic)

    def smallest(self) -> int:
        """A limit no topic is below (also one not read, whose limit is Kafka's default)."""
        return min([*self._limits.values(), DEFAULT_TOPIC_LIMIT])

    def batch_bytes(self) -> int:
        """A producer ``batch.size`` under every topic's limit."""
        smallest = min(self._limits.values(), default=DEFAULT_TOPIC_LIMIT)
        return max(1024, min(_PRODUCER_BATCH, smallest - _BATCH_HEADER))
