"""``MemoryKafka``: the Kafka port over a simulated ``Broker``, one instance per process.

It keeps the port's contract (``framework/kafka/port.py``) as ``Clients`` does over a real
broker: the same errors, reset policies, delivery callbacks, and ``read_log`` of a missing
topic reading as empty. Every call first asks ``faults.before(operation)``, which may switch
to another simulated party, fail the call (``KafkaIOError``), kill the caller, or answer
``"after"``: an ``append`` or a ``commit`` is then done and still reported failed (a timeout
whose write landed). ``crash(rng)`` is the process dying: each producer's queued records
reach Kafka up to a random point per partition, the rest are lost, callbacks never run.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from framework.clock import Clock
from framework.kafka import (
    DeliveryError,
    KafkaConsumer,
    KafkaIOError,
    KafkaProducer,
    Message,
    OffsetResetError,
    RecordTooLargeError,
    TopicDescription,
    TopicSpec,
)
from framework.kafka.port import DeliveryCallback, Header, OffsetReset
from rebalance.positions import OffsetRange, Position
from tests.sim.broker import MAX_MESSAGE_BYTES, Broker, StoredRecord
from tests.sim.consumer import MemoryConsumer

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


class NoFaults:
    """Nothing goes wrong."""

    def before(self, operation: str) -> str | None:
        """Nothing."""
        return None

    def after(self, operation: str) -> None:
        """Nothing."""


class SimMessage:
    """A record as a consumer or a delivery callback sees it (the ``Message`` protocol)."""

    __slots__ = ("_record",)

    def __init__(self, record: StoredRecord) -> None:
        self._record = record

    def topic(self) -> str | None:
        """Its topic."""
        return self._record.topic

    def partition(self) -> int | None:
        """Its partition."""
        return self._record.partition

    def offset(self) -> int | None:
        """Its offset."""
        return self._record.offset

    def key(self) -> bytes | None:
        """Its key."""
        return self._record.key

    def value(self) -> bytes | None:
        """Its value."""
        return self._record.value

    def timestamp(self) -> tuple[int, int]:
        """``(1: create time, milliseconds)``."""
        return (1, self._record.timestamp_ms)

    def headers(self) -> Any:
        """``[(name, value)]`` or ``None``."""
        return list(self._record.headers) or None


class _Unsent(SimMessage):
    """A record not written (what a failed delivery's callback gets)."""


class MemoryProducer(KafkaProducer):
    """A producer queueing records until ``poll``/``flush`` (or a crash) delivers them."""

    def __init__(self, kafka: MemoryKafka, max_bytes: int, timeout_ms: int) -> None:
        self._kafka = kafka
        self._max_bytes = max_bytes
        self._timeout = timeout_ms / 1000
        #: (position, record, callback, when queued)
        self.queue: list[tuple[Position, dict[str, Any], DeliveryCallback | None, float]] = []

    def produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        *,
        headers: Sequence[Header] | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> None:
        """Queue one record (see ``KafkaProducer.produce``)."""
        self._kafka.before("producer.produce")
        stored = tuple(
            (name, raw.encode() if isinstance(raw, str) else raw) for name, raw in headers or ()
        )
        record = {
            "key": key,
            "value": value,
            "headers": stored,
            "timestamp_ms": int(self._kafka.clock.time() * 1000),
            "origin": self._kafka.name,
        }
        size = len(key or b"") + len(value or b"")
        if size > self._max_bytes:
            raise RecordTooLargeError(
                f'KafkaError{{code=MSG_SIZE_TOO_LARGE,val=10,str="Unable to produce message: '
                f'Broker: Message size too large"}} ({size} bytes)',
                "Broker: Message size too large",
            )
        broker = self._kafka.broker
        count = broker.partition_count(topic)
        if partition is None:
            partition = _default_partition(key, max(count, 1))
        self.queue.append(((topic, partition), record, on_delivery, self._kafka.clock.monotonic()))

    def poll(self, timeout: float = 0.0) -> int:
        """Deliver what is queued and serve the callbacks."""
        self._kafka.before("producer.poll")
        return self._deliver(len(self.queue))

    def flush(self, timeout: float) -> int:
        """Deliver everything queued; 0 remain."""
        self._kafka.before("producer.flush")
        self._deliver(len(self.queue))
        return 0

    def partition_count(self, topic: str) -> int:
        """The broker's count now."""
        self._kafka.before("producer.partition_count")
        return self._kafka.broker.partition_count(topic)

    def _deliver(self, count: int) -> int:
        served = 0
        while self.queue and served < count:
            position, record, callback, queued = self.queue.pop(0)
            error, message = self._write(position, record, queued)
            served += 1
            if callback is not None:
                callback(error, message)
        return served

    def _write(
        self, position: Position, record: dict[str, Any], queued: float
    ) -> tuple[DeliveryError | None, Message]:
        broker = self._kafka.broker
        topic, partition = position
        unsent = _Unsent(StoredRecord(topic, partition, -1, **record))
        if self._kafka.clock.monotonic() - queued > self._timeout:
            # librdkafka fails a record it could not write within delivery.timeout.ms
            text = f"Local: Message timed out ({topic}[{partition}])"
            return DeliveryError("Local: Message timed out", text), unsent
        if not 0 <= partition < broker.partition_count(topic):
            text = f"Broker: Unknown topic or partition: {topic}[{partition}]"
            return DeliveryError("Unknown topic or partition", text), unsent
        size = len(record["key"] or b"") + len(record["value"] or b"")
        if size > broker.limit(topic):
            text = f"Broker: Message size too large ({size} bytes to {topic})"
            return DeliveryError("Broker: Message size too large", text, too_large=True), unsent
        return None, SimMessage(broker.append(position, record))

    def crash(self, rng: random.Random) -> None:
        """The process died: per partition, a random prefix of the queue reaches Kafka."""
        cut: dict[Position, bool] = {}
        for position, record, _callback, queued in self.queue:
            if position not in cut:
                cut[position] = rng.random() < 0.5
            if not cut[position]:
                self._write(position, record, queued)
                cut[position] = rng.random() < 0.3
        self.queue.clear()


class MemoryKafka:
    """The port of one simulated process (``name``) to ``broker``, on ``clock``."""

    def __init__(
        self,
        broker: Broker,
        clock: Clock,
        *,
        name: str = "process",
        faults: Faults | None = None,
    ) -> None:
        self.broker = broker
        self.clock = clock
        self.name = name
        self.faults: Faults = NoFaults() if faults is None else faults
        self.producers: list[MemoryProducer] = []
        self.consumers: list[MemoryConsumer] = []

    def before(self, operation: str) -> str | None:
        """Ask the faults about ``operation``."""
        return self.faults.before(operation)

    # -- clients -------------------------------------------------------------------------

    def consumer(
        self,
        group_id: str,
        *,
        reset: OffsetReset | None = None,
        store_offsets: bool = True,
        name: str = "consumer",
    ) -> KafkaConsumer:
        """A new consumer (librdkafka's default reset is ``latest``)."""
        self.before("kafka.consumer")
        consumer = MemoryConsumer(self, group_id, reset or "latest", name)
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
        limit = int(wanted.get("message.max.bytes", MAX_MESSAGE_BYTES))
        timeout = delivery_timeout_ms if delivery_timeout_ms is not None else 120_000
        timeout = int(wanted.get("delivery.timeout.ms", timeout))
        producer = MemoryProducer(self, limit, timeout)
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

    def read_log(self, topic: str, partition: int = 0) -> list[tuple[bytes | None, bytes | None]]:
        """Every record of ``topic[partition]`` now; a missing topic reads as empty."""
        self.before("kafka.read_log")
        if topic not in self.broker.topics:
            return []
        records = [(r.key, r.value) for r in self.broker.records(topic, partition)]
        self.faults.after("kafka.read_log")
        return records

    def append(self, topic: str, records: Sequence[tuple[bytes, bytes]]) -> None:
        """Write ``records`` to ``topic[0]``."""
        after = self.before("kafka.append") == "after"
        if topic not in self.broker.topics:
            raise KafkaIOError(f"could not write to {topic!r}: Unknown topic or partition")
        for key, value in records:
            self.broker.append(
                (topic, 0),
                {
                    "key": key,
                    "value": value,
                    "headers": (),
                    "timestamp_ms": int(self.clock.time() * 1000),
                    "origin": self.name,
                },
            )
        if after:
            raise KafkaIOError(f"could not write to {topic!r}: timed out (the write landed)")

    def close(self) -> None:
        """Nothing is held."""

    def crash(self, rng: random.Random) -> None:
        """The process died (see the module docstring)."""
        for producer in self.producers:
            producer.crash(rng)
        for consumer in self.consumers:
            consumer.closed = True
        self.producers.clear()
        self.consumers.clear()

    def watermarks_of(self, positions: Iterable[Position]) -> dict[Position, OffsetRange]:
        """``[start, end)`` of each partition (for consumers)."""
        result = {}
        for position in positions:
            log = self.broker.partition(position)
            result[position] = OffsetRange(log.start, log.end)
        return result

    def reset_error(self, position: Position, offset: int) -> OffsetResetError:
        """The error of a consumer made with ``reset="error"`` at a position not held."""
        log = self.broker.partition(position)
        reason = (
            f"fetch position {offset} is out of range for {position[0]} [{position[1]}] "
            f"(log [{log.start}, {log.end})): Local: No offset stored"
        )
        return OffsetResetError(f"reset: {reason}", reason)


def _default_partition(key: bytes | None, count: int) -> int:
    import zlib  # noqa: PLC0415

    return zlib.crc32(key or b"") % count
