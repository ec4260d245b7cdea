"""The Kafka port: the interface every Kafka client splitstate uses is reached through.

``Kafka`` makes consumers and producers and does topic admin and the coordination logs'
reads and appends; ``Consumer`` and ``Producer`` are the few operations the code really
uses. Values crossing the port are splitstate's own: positions (``(topic, partition)``),
offset maps, ``OffsetRange``, the ``Message`` protocol, ``DeliveryError`` and the errors of
``framework.kafka.errors``. ``framework.kafka.clients.Clients`` implements the port with
confluent-kafka; a test or a simulation may implement it in memory.

Consumers only ever read assigned partitions (never a subscription): where each reads from
is the caller's decision, and what the consumer group holds are the offsets the caller
commits.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, NamedTuple, Protocol

from framework.clock import Clock
from rebalance.positions import OffsetRange, Position

__all__ = [
    "DeliveryCallback",
    "DeliveryError",
    "Header",
    "Isolation",
    "Kafka",
    "KafkaConsumer",
    "KafkaProducer",
    "LogRecord",
    "Message",
    "OffsetReset",
    "TopicDescription",
    "TopicSpec",
    "TransactionalProducer",
]

#: A record header as a producer takes it.
Header = tuple[str, str | bytes | None]


class LogRecord(NamedTuple):
    """One record of a coordination log as ``Kafka.read_log`` reads it: its offset (to name
    it in an error), key and value (``None``: a tombstone)."""

    offset: int
    key: bytes | None
    value: bytes | None


#: What a consumer does at a position Kafka does not hold (no committed offset, or deleted):
#: start at the earliest record, or stop with ``OffsetResetError``.
OffsetReset = Literal["earliest", "error"]

#: What a consumer reads (Kafka's ``isolation.level``): ``read_committed`` delivers no record
#: of an open or aborted transaction and its ``watermarks`` end at the last stable offset;
#: ``read_uncommitted`` delivers them too, and its ``watermarks`` end at the high watermark.
Isolation = Literal["read_committed", "read_uncommitted"]


class Message(Protocol):
    """A consumed (or delivered) record."""

    def topic(self) -> str | None:
        """Its topic."""
        ...

    def partition(self) -> int | None:
        """Its partition."""
        ...

    def offset(self) -> int | None:
        """Its offset."""
        ...

    def key(self) -> bytes | None:
        """Its key."""
        ...

    def value(self) -> bytes | None:
        """Its value."""
        ...

    def timestamp(self) -> tuple[int, int]:
        """``(timestamp type, milliseconds)``."""
        ...

    def headers(self) -> Any:
        """Its headers: ``[(name, value)]`` or ``None``."""
        ...


@dataclass(frozen=True)
class DeliveryError:
    """Why Kafka did not take a produced record (given to a delivery callback).

    ``reason``: Kafka's short description; ``text``: the full error (what ``str`` gives);
    ``too_large``: the record is larger than the broker or the topic accepts; ``fatal``: the
    producer cannot go on.
    """

    reason: str
    text: str
    too_large: bool = False
    fatal: bool = False

    def __str__(self) -> str:
        return self.text


#: Called once per produced record, from ``poll`` or ``flush``: the error (``None`` when the
#: record was written) and the record (with its offset once written).
DeliveryCallback = Callable[[DeliveryError | None, Message], None]


@dataclass(frozen=True)
class TopicSpec:
    """A topic to create when missing."""

    name: str
    partitions: int
    replication_factor: int = 1
    config: Mapping[str, str] | None = None


@dataclass(frozen=True)
class TopicDescription:
    """What Kafka describes of a topic: its id, and the racks of each partition's replicas
    (partitions in order of their id)."""

    name: str
    topic_id: uuid.UUID
    racks: tuple[tuple[str, ...], ...]

    @property
    def partitions(self) -> int:
        """The topic's partition count."""
        return len(self.racks)


class KafkaConsumer(Protocol):
    """A consumer of assigned partitions, in consumer group ``group_id`` (for commits).

    Timeouts of the calls that ask the broker are the implementation's (30s with
    confluent-kafka). Failures raise ``KafkaIOError`` (``UnknownPartitionError`` for a
    partition that does not exist).
    """

    def assign(self, starts: Mapping[Position, int | None]) -> None:
        """Read exactly these partitions, each from its offset (``None``: its beginning)."""
        ...

    def add(self, starts: Mapping[Position, int | None]) -> None:
        """Also read these partitions, each from its offset (``None``: its beginning)."""
        ...

    def remove(self, positions: Iterable[Position]) -> None:
        """Stop reading these partitions."""
        ...

    def consume(self, max_records: int, timeout: float) -> list[Message]:
        """Up to ``max_records`` records, waiting at most ``timeout`` seconds (the real
        consumer waits that long for the batch to fill; the in-memory one returns what it has).

        Never returns error events: reaching a partition's end is not reported, a passing
        error is logged, a fatal one raises ``KafkaIOError``, and a position Kafka no longer
        holds raises ``OffsetResetError`` (for a consumer made with ``reset="error"``).
        """
        ...

    def seek(self, position: Position, offset: int) -> None:
        """Read ``position`` on from ``offset`` (an assigned partition)."""
        ...

    def pause(self, positions: Iterable[Position]) -> None:
        """Stop fetching these assigned partitions until ``resume``."""
        ...

    def resume(self, positions: Iterable[Position]) -> None:
        """Fetch these paused partitions again."""
        ...

    def position(self, position: Position) -> int | None:
        """The offset of the next record of ``position`` to consume (``None``: not known:
        nothing fetched since it was assigned or sought). It moves past the transaction
        markers and aborted records the consumer passed over without a record, never past a
        record not consumed yet."""
        ...

    def committed(self, positions: Iterable[Position]) -> dict[Position, int]:
        """The group's committed offset of each partition that has one. A partition Kafka
        answers with an error of its own is asked again, then raises ``KafkaIOError``: it
        is never left out as if it had no offset."""
        ...

    def commit(self, offsets: Mapping[Position, int], *, asynchronous: bool = False) -> None:
        """Commit these next offsets to the group (waiting for it, unless ``asynchronous``)."""
        ...

    def watermarks(self, positions: Iterable[Position]) -> dict[Position, OffsetRange]:
        """``[earliest retained, end)`` of each partition, as Kafka reports them now (for a
        ``read_committed`` consumer the end is the last stable offset: before any
        transaction still open; for a ``read_uncommitted`` one the high watermark)."""
        ...

    def fetched_ends(self, positions: Iterable[Position]) -> dict[Position, int]:
        """The end offset of each partition as this consumer's fetches last saw it, asking
        the broker nothing (partitions not fetched yet are left out)."""
        ...

    def group_metadata(self) -> object:
        """The consumer group's metadata, for ``TransactionalProducer.send_offsets``."""
        ...

    def close(self) -> None:
        """Leave; the consumer is not used again."""
        ...

    def __enter__(self) -> KafkaConsumer:
        """The consumer itself, closed when the block ends."""
        return self

    def __exit__(
        self,
        _kind: type[BaseException] | None,
        _error: BaseException | None,
        _trace: TracebackType | None,
    ) -> None:
        self.close()


class KafkaProducer(Protocol):
    """A producer (idempotent: a record is written once however often it is retried)."""

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
        """Queue one record (for ``partition``, or where Kafka's default partitioner puts it).

        Raises ``BufferError`` while the local queue is full (``poll``, then produce again),
        ``RecordTooLargeError`` when the record is larger than the producer accepts, and
        ``KafkaIOError`` for any other refusal.
        """
        ...

    def poll(self, timeout: float = 0.0) -> int:
        """Serve delivery callbacks, waiting up to ``timeout`` seconds; returns how many.
        A fatal producer error raises ``KafkaIOError`` (``ProducerFencedError`` when a newer
        producer of the same transactional id fenced this one)."""
        ...

    def flush(self, timeout: float) -> int:
        """Wait for every queued record; returns how many are still queued (fatal errors
        raise, as ``poll``'s)."""
        ...

    def partition_count(self, topic: str) -> int:
        """``topic``'s partition count in this producer's metadata, refreshed now (a new
        partition can be produced to once it shows here)."""
        ...

    def close(self) -> None:
        """Let go of the producer: its connections close now; records still queued are
        dropped (``flush`` first). It is not used again."""
        ...


class TransactionalProducer(KafkaProducer, Protocol):
    """A producer that writes in transactions: the records produced between ``begin`` and
    ``commit`` and the consumer group offsets sent with ``send_offsets`` become visible to
    ``read_committed`` consumers together, or (``abort``, or a crash) not at all.

    A producer made later with the same transactional id fences this one: its calls then raise
    ``ProducerFencedError``. ``TransactionAbortableError``: the transaction cannot commit;
    ``abort`` it. Other failures raise ``KafkaIOError``.
    """

    def begin(self) -> None:
        """Open a transaction."""
        ...

    def send_offsets(self, offsets: Mapping[Position, int], consumer: KafkaConsumer) -> None:
        """Commit these next offsets to ``consumer``'s group with the open transaction."""
        ...

    def commit(self, timeout: float) -> None:
        """Write every record of the open transaction (flushing them first) and commit it."""
        ...

    def abort(self, timeout: float) -> None:
        """Abort the open transaction: none of its records or offsets become visible."""
        ...


class Kafka(Protocol):
    """The port: every consumer, producer and admin request splitstate makes.

    ``clock``: the clock everything using the port measures time, waits and starts
    background work with (the real one for Kafka; a simulated one in the simulation).
    """

    clock: Clock

    def consumer(
        self,
        group_id: str,
        *,
        reset: OffsetReset | None = None,
        store_offsets: bool = True,
        name: str = "consumer",
        isolation: Isolation = "read_committed",
    ) -> KafkaConsumer:
        """A new consumer in group ``group_id`` (offsets are only ever committed explicitly),
        reading ``read_committed`` unless ``isolation`` says otherwise: no record of an open
        or aborted transaction is delivered.

        ``reset``: where to read when a position is not held (default: the client's);
        ``store_offsets``: whether consumed offsets are kept by the client for a commit
        without offsets (never relied on; the runtime turns it off); ``name``: how its
        log lines name it; ``isolation``: ``read_uncommitted`` for the high watermark
        (everything written, open transactions too).
        """
        ...

    def producer(
        self,
        *,
        linger_ms: int | None = None,
        delivery_timeout_ms: int | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> KafkaProducer:
        """A new idempotent producer; ``settings``: the user's own client settings."""
        ...

    def transactional_producer(
        self,
        transactional_id: str,
        *,
        linger_ms: int | None = None,
        delivery_timeout_ms: int | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> TransactionalProducer:
        """A new producer with ``transactional_id``, its transactions initialised (which
        fences every earlier producer of that id, and aborts what it left open)."""
        ...

    def partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        """Current partition count of each existing topic among ``topics``."""
        ...

    def create_topics(self, specs: Sequence[TopicSpec]) -> list[str]:
        """Create the topics of ``specs`` that do not exist; returns the names created."""
        ...

    def create_partitions(self, topic: str, count: int) -> None:
        """Grow ``topic`` to ``count`` partitions."""
        ...

    def topic_configs(self, topics: Sequence[str]) -> dict[str, dict[str, str | None]]:
        """Each existing topic's configs (name -> value); missing topics are left out."""
        ...

    def describe_topics(self, topics: Sequence[str]) -> dict[str, TopicDescription]:
        """Each topic's id and replica racks."""
        ...

    def read_log(self, topic: str, partition: int = 0) -> list[LogRecord]:
        """Every record of ``topic[partition]`` from its start to its current end, in order;
        a topic that does not exist yet reads as empty."""
        ...

    def append(self, topic: str, records: Sequence[tuple[bytes, bytes | None]]) -> int:
        """Write ``(key, value)`` records to partition 0 of ``topic`` (a value ``None``: a
        tombstone of its key) and wait until all are written (one producer per port serves
        every append); returns the offset after the last of them (the log reaches at least
        that far)."""
        ...

    def prepare_appends(self) -> None:
        """Make the producer of ``append`` now, if it is not made yet, so that it connects
        while the caller does other work (an append makes it when needed anyway)."""
        ...

    def close(self) -> None:
        """Release what the port holds (its producer for appends)."""
        ...
