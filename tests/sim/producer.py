"""``MemoryProducer``: the port's producer over a simulated broker, and ``SimMessage``, the
records its callbacks and the consumers see."""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from framework.kafka import (
    DeliveryError,
    KafkaProducer,
    Message,
    RecordTooLargeError,
    UnknownPartitionError,
)
from framework.kafka.port import DeliveryCallback, Header
from rebalance.positions import Position
from tests.sim.broker import StoredRecord

if TYPE_CHECKING:
    from tests.sim.kafka import MemoryKafka

__all__ = [
    "METADATA_REFRESH_SECONDS",
    "PRODUCER_MAX_BYTES",
    "MemoryProducer",
    "SimMessage",
    "too_large",
]

#: librdkafka's default ``message.max.bytes``: the largest record a producer takes.
PRODUCER_MAX_BYTES = 1_000_000

#: librdkafka's ``topic.metadata.refresh.interval.ms``: how old a producer's partition counts
#: get before it re-reads them on its own.
METADATA_REFRESH_SECONDS = 300.0

#: how often a flush that cannot reach the broker tries again
_FLUSH_RETRY_SECONDS = 0.25


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


@dataclass
class _Queued:
    """A record in the producer's queue: written to the broker (``result`` set) as soon as
    the process can reach it, its delivery report served by ``poll``/``flush``."""

    position: Position
    record: dict[str, Any]
    callback: DeliveryCallback | None
    queued: float
    result: tuple[DeliveryError | None, Message] | None = None


class MemoryProducer(KafkaProducer):
    """A producer that writes each record to the broker when it is queued, as librdkafka's
    background thread sends it within milliseconds, unless the process cannot reach the
    broker (then when it can again, or it fails once older than the delivery timeout); a
    record counts against the queue until ``poll``/``flush`` served its delivery report.

    Like librdkafka it places records with the partition counts of its own metadata: asked
    for when it first produces to a topic (that record is not refused: a partition the topic
    lacks fails its delivery), again by ``partition_count`` or once they are
    ``METADATA_REFRESH_SECONDS`` old; a partition they lack is refused at ``produce``. It
    refuses a record over ``max_bytes`` (librdkafka's ``message.max.bytes``, by default
    ``PRODUCER_MAX_BYTES``) at ``produce``, and one more than ``max_queued`` records
    (``queue.buffering.max.messages``) with ``BufferError``, as librdkafka does.
    """

    def __init__(
        self, kafka: MemoryKafka, max_bytes: int, timeout_ms: int, max_queued: int
    ) -> None:
        self._kafka = kafka
        self._max_bytes = max_bytes
        self._max_queued = max_queued
        self._timeout = timeout_ms / 1000
        #: the records queued, in order, until their delivery report is served
        self.queue: list[_Queued] = []
        #: topic -> (partition count, when read) of this producer's metadata
        self._metadata: dict[str, tuple[int, float]] = {}

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
            "timestamp_ms": int(self._kafka.clock.time() * 1000)
            - self._kafka.broker.delay(topic, key, value),
            "origin": self._kafka.name,
        }
        size = len(key or b"") + len(value or b"")
        if size > self._max_bytes:
            raise too_large(size)
        if len(self.queue) >= self._max_queued:
            raise BufferError("Local: Queue full")
        known = topic in self._metadata  # else it is asked for; this record waits for it
        count = self._count(topic, refresh=False)
        if partition is None:
            partition = _default_partition(key, max(count, 1))
        elif known and not 0 <= partition < count:
            raise UnknownPartitionError(
                'KafkaError{code=_UNKNOWN_PARTITION,val=-190,str="Unable to produce message: '
                f'Local: Unknown partition"}} ({topic} [{partition}] of {count} partitions)'
            )
        now = self._kafka.clock.monotonic()
        self.queue.append(_Queued((topic, partition), record, on_delivery, now))
        self._send()

    def poll(self, timeout: float = 0.0) -> int:
        """Deliver what is queued and serve the callbacks; with nothing to serve, wait
        ``timeout`` on the clock (as librdkafka does)."""
        self._kafka.before("producer.poll")
        self._send()
        # a poll that does not wait sees only the reports that came back already: a random
        # prefix of them (so batches of a pipeline overlap in flight)
        served = self._serve(partial=timeout <= 0)
        if not served and timeout > 0:
            self._kafka.clock.sleep(timeout)
        return served

    def flush(self, timeout: float) -> int:
        """Deliver everything queued (0 remain); while the process cannot reach the broker,
        retry for up to ``timeout`` (as librdkafka does, returning once all are delivered)
        and return how many are still queued (only those past the delivery timeout fail
        meanwhile)."""
        self._kafka.before("producer.flush")
        self._send()
        deadline = self._kafka.clock.monotonic() + timeout
        while any(item.result is None for item in self.queue):
            left = deadline - self._kafka.clock.monotonic()
            if left <= 0:
                break
            self._kafka.clock.sleep(min(left, _FLUSH_RETRY_SECONDS))
            self._send()
        self._serve()
        return len(self.queue)

    def send_in_background(self) -> None:
        """What librdkafka's thread does whenever it runs: ``_send``."""
        self._send()

    def _send(self) -> None:
        """Write the unsent records, in order, if the process can reach the broker; fail
        those older than the delivery timeout if it cannot."""
        unsent = [item for item in self.queue if item.result is None]
        if unsent and self._kafka.faults.unreachable(self._kafka.name):
            now = self._kafka.clock.monotonic()
            for item in unsent:
                if now - item.queued > self._timeout:
                    item.result = self._write(item)
        else:
            for item in unsent:
                item.result = self._write(item)
        senders = self._kafka.broker.senders
        if any(item.result is None for item in self.queue):
            senders[id(self)] = self.send_in_background
        else:
            senders.pop(id(self), None)

    def _serve(self, *, partial: bool = False) -> int:
        """Serve the delivery reports of the records written (or failed), or with ``partial``
        those of a random prefix of them; returns how many."""
        done = [item for item in self.queue if item.result is not None]
        if partial and done:
            done = done[: self._kafka.broker.rng.randint(0, len(done))]
        served = {id(item) for item in done}
        self.queue = [item for item in self.queue if id(item) not in served]
        for item in done:
            assert item.result is not None
            if item.callback is not None:
                item.callback(*item.result)
        return len(done)

    def close(self) -> None:
        """Nothing to let go of: a simulated producer holds no connections."""

    def partition_count(self, topic: str) -> int:
        """The broker's count now (this producer's metadata is refreshed)."""
        self._kafka.before("producer.partition_count")
        return self._count(topic, refresh=True)

    def _count(self, topic: str, *, refresh: bool) -> int:
        """``topic``'s partition count in this producer's metadata (0: not known)."""
        now = self._kafka.clock.monotonic()
        known = self._metadata.get(topic)
        if refresh or known is None or now - known[1] >= METADATA_REFRESH_SECONDS:
            count = self._kafka.broker.partition_count(topic)
            if count:
                self._metadata[topic] = (count, now)
            return count
        return known[0]

    def _write(self, item: _Queued) -> tuple[DeliveryError | None, Message]:
        refused = self._refusal(item)
        if refused is not None:
            return refused
        return None, SimMessage(self._kafka.broker.append(item.position, item.record))

    def _refusal(self, item: _Queued) -> tuple[DeliveryError, Message] | None:
        """Why ``item`` cannot be written now (timed out, no such partition, no key for a
        compacted topic, too large for its topic), with the record as its callback gets it;
        ``None`` when it can."""
        broker = self._kafka.broker
        position, record = item.position, item.record
        topic, partition = position
        unsent = _Unsent(StoredRecord(topic, partition, -1, **record))
        if self._kafka.clock.monotonic() - item.queued > self._timeout:
            # librdkafka fails a record it could not write within delivery.timeout.ms
            text = f"Local: Message timed out ({topic}[{partition}])"
            broker.expired_origins.add(self._kafka.name)
            return DeliveryError("Local: Message timed out", text), unsent
        if not 0 <= partition < broker.partition_count(topic):
            text = f"Broker: Unknown topic or partition: {topic}[{partition}]"
            return DeliveryError("Unknown topic or partition", text), unsent
        policy = broker.topic(topic).configs.get("cleanup.policy", "")
        if record["key"] is None and "compact" in policy:
            text = (
                f"Broker: Invalid record (a compacted topic takes no record without a key: {topic})"
            )
            return DeliveryError("Broker: Invalid record", text), unsent
        size = len(record["key"] or b"") + len(record["value"] or b"")
        if size > broker.limit(topic):
            text = f"Broker: Message size too large ({size} bytes to {topic})"
            return DeliveryError("Broker: Message size too large", text, too_large=True), unsent
        return None

    def crash(self, rng: random.Random) -> None:
        """The process died: per partition, a random prefix of the records not written yet
        reaches Kafka (the broker came back as it died)."""
        cut: dict[Position, bool] = {}
        for item in self.queue:
            if item.result is not None:
                continue
            if item.position not in cut:
                cut[item.position] = rng.random() < 0.5
            if not cut[item.position]:
                self._write(item)
                cut[item.position] = rng.random() < 0.3
        self.queue.clear()


def _default_partition(key: bytes | None, count: int) -> int:
    return zlib.crc32(key or b"") % count


def too_large(size: int) -> RecordTooLargeError:
    """What librdkafka's ``produce`` raises for a record of ``size`` bytes over its limit."""
    return RecordTooLargeError(
        f'KafkaError{{code=MSG_SIZE_TOO_LARGE,val=10,str="Unable to produce message: '
        f'Broker: Message size too large"}} ({size} bytes)',
        "Broker: Message size too large",
    )
