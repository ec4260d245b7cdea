"""``MemoryKafka``: the Kafka port over a simulated ``Broker``, one instance per process.

It keeps the port's contract (``framework/kafka/port.py``) as ``Clients`` does over a real
broker: the same errors, reset policies, delivery callbacks, and ``read_log`` of a missing
topic reading as empty. Every call first asks ``faults.before(operation)``, which may switch
to another simulated party, fail the call (``KafkaIOError``), kill the caller, or answer
``"after"``: an ``append`` or a ``commit`` is then done and still reported failed (a timeout
whose write landed). ``crash(rng)`` is the process dying: each producer's queued records
reach Kafka up to a random point per partition, the rest are lost, callbacks never run; a
transaction it left open stays open (its records hold back ``read_committed`` readers) until
a producer of the same transactional id starts or its timeout runs out.

Its consumers are ``read_committed`` (as ``Clients`` makes them) unless made
``read_uncommitted``: ``watermarks`` end at the last stable offset (the high watermark for a
``read_uncommitted`` one), ``fetched_ends`` at the high watermark (librdkafka's cached one).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from framework.clock import Clock
from framework.kafka import (
    KafkaConsumer,
    KafkaIOError,
    KafkaProducer,
    LogRecord,
    OffsetResetError,
    TopicDescription,
    TopicSpec,
    TransactionalProducer,
)
from framework.kafka.port import Isolation, OffsetReset
from rebalance.positions import OffsetRange, Position
from tests.sim.broker import Broker, StoredRecord
from tests.sim.consumer import MemoryConsumer
from tests.sim.producer import PRODUCER_MAX_BYTES, MemoryProducer, SimMessage, too_large
from tests.sim.transactions import MemoryTransactionalProducer

__all__ = ["Faults", "MemoryKafka", "MemoryProducer", "NoFaults", "SimMessage"]


class Faults(Protocol):
    """What may go wrong in a call (see the module docstring)."""

    def before(self, operation: str) -> str | None:
        """Called first in every call; may raise, or return ``"after"``."""
        ...

    def after(self, operation: str) -> None:
        """Called once a read has its answer, before returning it: may wait (a slow reply
        whose answer is as of before the wait)."""
        ...

    def fetch(self, wanted: int) -> int:
        """How many of ``wanted`` records a consumer's fetch may return now: none while the
        caller cannot reach the broker, sometimes fewer (a fetch response cut short)."""
        ...

    def starved(self, topic: str) -> bool:
        """Whether the caller's fetches of ``topic`` get nothing now (its leader is away)."""
        ...

    def unreachable(self, process: str) -> bool:
        """Whether ``process`` (``name#incarnation``) cannot reach the broker now."""
        ...

    def cut(self, topic: str, found: list[StoredRecord]) -> list[StoredRecord]:
        """What the caller gets of ``found``, the records a fetch read from ``topic``: all,
        or a part when the fetch is cut short there."""
        ...


class NoFaults:
    """Nothing goes wrong."""

    def before(self, operation: str) -> str | None:
        """Nothing."""
        return None

    def after(self, operation: str) -> None:
        """Nothing."""

    def fetch(self, wanted: int) -> int:
        """All of them."""
        return wanted

    def starved(self, topic: str) -> bool:
        """Never."""
        return False

    def unreachable(self, process: str) -> bool:
        """Never."""
        return False

    def cut(self, topic: str, found: list[StoredRecord]) -> list[StoredRecord]:
        """All of them."""
        return found


class MemoryKafka:
    """The port of one simulated process (``name``) to ``broker``, on ``clock``."""

    def __init__(
        self,
        broker: Broker,
        clock: Clock,
        *,
        name: str = "process",
        faults: Faults | None = None,
        max_queued: int = 100_000,
    ) -> None:
        self.broker = broker
        #: librdkafka's ``queue.buffering.max.messages`` for this process's producers
        self.max_queued = max_queued
        self.clock = clock
        self.name = name
        self.faults: Faults = NoFaults() if faults is None else faults
        self.producers: list[MemoryProducer] = []
        self.consumers: list[MemoryConsumer] = []

    def before(self, operation: str) -> str | None:
        """Ask the faults about ``operation`` (a switch point); then, as time passed, every
        producer sends what it can in the background."""
        try:
            return self.faults.before(operation)
        finally:
            if self.broker.open_transactions:
                now = self.clock.monotonic()
                self.broker.expire_transactions(now, int(self.clock.time() * 1000))
            for send in list(self.broker.senders.values()):
                send()

    # -- clients -------------------------------------------------------------------------

    def consumer(
        self,
        group_id: str,
        *,
        reset: OffsetReset | None = None,
        store_offsets: bool = True,
        name: str = "consumer",
        isolation: Isolation = "read_committed",
    ) -> KafkaConsumer:
        """A new consumer (librdkafka's default reset is ``latest``)."""
        self.before("kafka.consumer")
        consumer = MemoryConsumer(self, group_id, reset or "latest", name, isolation)
        self.consumers.append(consumer)
        return consumer

    def producer(
        self,
        *,
        linger_ms: int | None = None,
        delivery_timeout_ms: int | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> KafkaProducer:
        """A new producer (``message.max.bytes`` of ``settings`` limits what it takes)."""
        self.before("kafka.producer")
        wanted = settings or {}
        limit = int(wanted.get("message.max.bytes", PRODUCER_MAX_BYTES))
        timeout = delivery_timeout_ms if delivery_timeout_ms is not None else 120_000
        timeout = int(wanted.get("delivery.timeout.ms", timeout))
        queued = int(wanted.get("queue.buffering.max.messages", self.max_queued))
        producer = MemoryProducer(self, limit, timeout, queued)
        self.producers.append(producer)
        return producer

    def transactional_producer(
        self,
        transactional_id: str,
        *,
        linger_ms: int | None = None,
        delivery_timeout_ms: int | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> TransactionalProducer:
        """A new transactional producer; it fences every earlier one of ``transactional_id``
        and aborts the transaction one left open. Its transactions time out after
        ``transaction.timeout.ms`` (as ``Clients`` sets it: 60 s, or the delivery timeout if
        longer)."""
        self.before("kafka.transactional_producer")
        wanted = settings or {}
        timeout = delivery_timeout_ms if delivery_timeout_ms is not None else 120_000
        delivery = int(wanted.get("delivery.timeout.ms", timeout))
        producer = MemoryTransactionalProducer(
            self,
            transactional_id,
            int(wanted.get("message.max.bytes", PRODUCER_MAX_BYTES)),
            delivery,
            int(wanted.get("queue.buffering.max.messages", self.max_queued)),
            transaction_timeout_ms=int(wanted.get("transaction.timeout.ms", max(60_000, delivery))),
        )
        self.producers.append(producer)
        return producer

    # -- admin ---------------------------------------------------------------------------

    def partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        """Counts of the existing topics among ``topics``."""
        self.before("kafka.partition_counts")
        counts = {t: self.broker.partition_count(t) for t in topics if t in self.broker.topics}
        self.faults.after("kafka.partition_counts")
        return counts

    def create_topics(self, specs: Sequence[TopicSpec]) -> list[str]:
        """Create the missing topics of ``specs``."""
        self.before("kafka.create_topics")
        return [
            spec.name
            for spec in specs
            if self.broker.create_topic(spec.name, spec.partitions, dict(spec.config or {}))
        ]

    def create_partitions(self, topic: str, count: int) -> None:
        """Grow ``topic`` to ``count`` partitions."""
        self.before("kafka.create_partitions")
        self.broker.grow(topic, count)

    def topic_configs(self, topics: Sequence[str]) -> dict[str, dict[str, str | None]]:
        """Configs of the existing topics among ``topics``."""
        self.before("kafka.topic_configs")
        return {t: dict(self.broker.topics[t].configs) for t in topics if t in self.broker.topics}

    def describe_topics(self, topics: Sequence[str]) -> dict[str, TopicDescription]:
        """Ids and (rackless) replicas of ``topics``."""
        self.before("kafka.describe_topics")
        found = {}
        for name in topics:
            topic = self.broker.topic(name)
            racks = tuple(() for _ in topic.partitions)
            found[name] = TopicDescription(name, topic.topic_id, racks)
        return found

    # -- coordination logs ---------------------------------------------------------------

    def read_log(self, topic: str, partition: int = 0) -> list[LogRecord]:
        """Every record of ``topic[partition]`` now; a missing topic reads as empty."""
        self.before("kafka.read_log")
        if not 0 <= partition < self.broker.partition_count(topic):
            return []  # a missing topic or partition reads as empty
        stored = self.broker.records(topic, partition)
        records = [LogRecord(r.offset, r.key, r.value) for r in stored]
        self.faults.after("kafka.read_log")
        return records

    def append(self, topic: str, records: Sequence[tuple[bytes, bytes | None]]) -> int:
        """Write ``records`` to ``topic[0]`` (a value ``None``: a tombstone); returns the
        offset after the last. A record over
        the producer's limit stops the append there (those before it are written), one over
        the topic's is not written; either fails the append with ``KafkaIOError``."""
        after = self.before("kafka.append") == "after"
        if topic not in self.broker.topics:
            raise KafkaIOError(f"could not write to {topic!r}: Unknown topic or partition")
        refused: list[str] = []
        end = 0
        for key, value in records:
            size = len(key) + len(value or b"")
            if size > PRODUCER_MAX_BYTES:
                raise KafkaIOError(f"could not write to {topic!r}: {too_large(size)}")
            if size > self.broker.limit(topic):
                refused.append(f"Broker: Message size too large ({size} bytes)")
                continue
            stored = self.broker.append(
                (topic, 0),
                {
                    "key": key,
                    "value": value,
                    "headers": (),
                    "timestamp_ms": int(self.clock.time() * 1000),
                    "origin": self.name,
                },
            )
            end = stored.offset + 1
        if refused:
            raise KafkaIOError(f"could not write to {topic!r}: {refused[:3]}")
        if after:
            raise KafkaIOError(f"could not write to {topic!r}: timed out (the write landed)")
        return end

    def prepare_appends(self) -> None:
        """Nothing to prepare: appends write to the broker directly."""

    def close(self) -> None:
        """Nothing is held."""

    def crash(self, rng: random.Random) -> None:
        """The process died (see the module docstring)."""
        for producer in self.producers:
            producer.crash(rng)
            self.broker.senders.pop(id(producer), None)
        for consumer in self.consumers:
            consumer.closed = True
        self.producers.clear()
        self.consumers.clear()

    def watermarks_of(
        self, positions: Iterable[Position], committed: bool = True
    ) -> dict[Position, OffsetRange]:
        """``[start, last stable offset)`` of each partition (what Kafka's ListOffsets
        answers a ``read_committed`` consumer); ``[start, high watermark)`` when not
        ``committed`` (``read_uncommitted``)."""
        result = {}
        for position in positions:
            log = self.broker.partition(position)
            end = self.broker.stable_offset(position) if committed else log.end
            result[position] = OffsetRange(log.start, end)
        return result

    def reset_error(self, position: Position, offset: int) -> OffsetResetError:
        """The error of a consumer made with ``reset="error"`` at a position not held."""
        log = self.broker.partition(position)
        reason = (
            f"fetch position {offset} is out of range for {position[0]} [{position[1]}] "
            f"(log [{log.start}, {log.end})): Local: No offset stored"
        )
        return OffsetResetError(f"reset: {reason}", reason)
