"""The simulated cluster's state: topics of partitioned logs, consumer groups' offsets,
transactions.

Pure, deterministic Python: no threads, no time of its own (timestamps come from the clock
of whoever writes). The adversary acts on it directly: ``compact`` a compacted topic (the
last record of each key survives, offsets never change, gaps appear as in Kafka) and
``delete_before`` an offset (retention deleting a prefix).

Transactions are Kafka's: a record written in a transaction takes its offset when it is
written; ending the transaction writes a control record (a *marker*, COMMIT or ABORT) to
each partition it wrote to, which takes an offset too. A partition's *last stable offset*
is the first offset of its oldest open transaction (its end when none is open):
``read_committed`` consumers read below it only, skip markers and the records of aborted
transactions, and their ``watermarks`` end there. The end (the high watermark) counts
every record and marker. A transaction left open by a producer that died is aborted when a
producer of the same transactional id starts, or once its timeout ran out.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from framework.kafka import KafkaIOError, UnknownPartitionError
from rebalance.positions import Position

__all__ = [
    "DEFAULT_CONFIGS",
    "MAX_MESSAGE_BYTES",
    "Broker",
    "Partition",
    "StoredRecord",
    "Topic",
    "Transaction",
]

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
    """One record of a partition's log; ``origin`` names the process that wrote it;
    ``transaction``: the number of the transaction it was written in (``None``: none);
    ``marker``: ``"COMMIT"`` or ``"ABORT"`` for a transaction's control record."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int
    origin: str
    transaction: int | None = None
    marker: str | None = None

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
class Transaction:
    """One transaction of a transactional producer: ``open``, then ``committed`` or
    ``aborted``; ``firsts``: the offset of its first record in each partition it wrote to;
    ``deadline``: the simulated time the broker aborts it at while it is still open
    (``transaction.timeout.ms``)."""

    number: int
    transactional_id: str
    origin: str
    deadline: float
    state: str = "open"
    firsts: dict[Position, int] = field(default_factory=dict)


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
        #: every record and marker ever written to each topic (compaction and retention
        #: delete from the logs, not from here)
        self.written: dict[str, list[StoredRecord]] = {}
        #: processes (``name#incarnation``) some of whose records timed out in their
        #: producer's queue (a later record of theirs may have landed before the retry)
        self.expired_origins: set[str] = set()
        #: the background sender of each producer holding records it could not send yet, run
        #: at every call of any process (as librdkafka's thread sends what is queued whenever
        #: the broker is reachable), by the producer's id
        self.senders: dict[int, Callable[[], None]] = {}
        #: transactional id -> the epoch of its newest producer (older ones are fenced)
        self.transactional_epochs: dict[str, int] = {}
        #: every transaction by its number (the transactions' log)
        self.transactions: dict[int, Transaction] = {}
        #: the open transactions, by number
        self.open_transactions: dict[int, Transaction] = {}
        #: called with every record written (the adversary reacts to protocol steps)
        self.watchers: list[Callable[[StoredRecord], None]] = []
        #: called with a process's name, the consumer's name and the records each of its
        #: consumers' fetches got
        self.fetch_watchers: list[Callable[[str, str, list[StoredRecord]], None]] = []
        #: how long before it was queued a record (topic, key, value) happened: its
        #: timestamp is when it was queued less this (``tests/sim/event_times.py``)
        self.delay: Callable[[str, bytes | None, bytes | None], int] = _no_delay

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

    def append(
        self, position: Position, record: dict[str, Any], transaction: Transaction | None = None
    ) -> StoredRecord:
        """Write one record at the end of ``position`` (fields of ``StoredRecord`` but the
        position, offset and transaction), in the open ``transaction`` if one is given."""
        log = self.partition(position)
        number = None if transaction is None else transaction.number
        stored = StoredRecord(position[0], position[1], log.end, **record, transaction=number)
        if transaction is not None:
            assert transaction.state == "open", "a record of an ended transaction"
            transaction.firsts.setdefault(position, log.end)
        return self._write(log, stored)

    def _write(self, log: Partition, stored: StoredRecord) -> StoredRecord:
        log.records.append(stored)
        log.end += 1
        self.written.setdefault(stored.topic, []).append(stored)
        for watcher in self.watchers:
            watcher(stored)
        return stored

    def records(self, name: str, partition: int) -> list[StoredRecord]:
        """Every record ``name[partition]`` still holds."""
        return list(self.partition((name, partition)).records)

    def end_offset(self, name: str, partition: int) -> int:
        """The offset the next record of ``name[partition]`` gets (the high watermark)."""
        return self.partition((name, partition)).end

    # -- transactions --------------------------------------------------------------------

    def begin_transaction(self, transactional_id: str, origin: str, deadline: float) -> Transaction:
        """A new open transaction of ``transactional_id`` (written by ``origin``), aborted
        by the broker at simulated time ``deadline`` if still open then."""
        number = len(self.transactions) + 1
        transaction = Transaction(number, transactional_id, origin, deadline)
        self.transactions[number] = transaction
        self.open_transactions[number] = transaction
        return transaction

    def end_transaction(self, transaction: Transaction, commit: bool, timestamp_ms: int) -> None:
        """Commit or abort ``transaction``: a marker in each partition it wrote to."""
        if transaction.state != "open":
            return
        transaction.state = "committed" if commit else "aborted"
        del self.open_transactions[transaction.number]
        for position in sorted(transaction.firsts):
            log = self.partition(position)
            marker = StoredRecord(
                *position,
                log.end,
                key=None,
                value=None,
                headers=(),
                timestamp_ms=timestamp_ms,
                origin=transaction.origin,
                transaction=transaction.number,
                marker="COMMIT" if commit else "ABORT",
            )
            self._write(log, marker)

    def abort_transactions_of(self, transactional_id: str, timestamp_ms: int) -> None:
        """What a new producer of ``transactional_id`` does first: abort what an earlier one
        left open."""
        for transaction in list(self.open_transactions.values()):
            if transaction.transactional_id == transactional_id:
                self.end_transaction(transaction, False, timestamp_ms)

    def expire_transactions(self, now: float, timestamp_ms: int) -> None:
        """Abort every open transaction whose timeout ran out by ``now``."""
        for transaction in list(self.open_transactions.values()):
            if transaction.deadline <= now:
                self.end_transaction(transaction, False, timestamp_ms)

    def stable_offset(self, position: Position) -> int:
        """The last stable offset of ``position``: the first offset of its oldest open
        transaction, or its end."""
        log = self.partition(position)
        if not self.open_transactions:
            return log.end
        firsts = [
            t.firsts[position] for t in self.open_transactions.values() if position in t.firsts
        ]
        return min(firsts, default=log.end)

    def aborted(self, record: StoredRecord) -> bool:
        """Whether ``record`` was written in a transaction that aborted (or is a marker)."""
        if record.marker is not None:
            return True
        if record.transaction is None:
            return False
        return self.transactions[record.transaction].state == "aborted"

    def visible(self, record: StoredRecord) -> bool:
        """Whether a ``read_committed`` consumer reads ``record`` (now): a plain record, or one
        of a committed transaction; never a marker."""
        if record.marker is not None:
            return False
        if record.transaction is None:
            return True
        return self.transactions[record.transaction].state == "committed"

    def read_end(self, position: Position) -> int:
        """The offset after the last record of ``position`` a ``read_committed`` consumer
        reads (0 when it holds none): where a reader of every such record has got to."""
        for record in reversed(self.partition(position).records):
            if self.visible(record):
                return record.offset + 1
        return 0

    def committed_records(self, name: str) -> list[StoredRecord]:
        """Every record ever written to topic ``name`` that a ``read_committed`` consumer
        reads (the checks' truth), in the order they were written."""
        return [record for record in self.written.get(name, []) if self.visible(record)]

    @property
    def ledger(self) -> dict[str, list[StoredRecord]]:
        """Each topic's ``committed_records``: no markers, no records of transactions that
        aborted or are still open."""
        return {name: self.committed_records(name) for name in self.written}

    # -- the adversary -------------------------------------------------------------------

    def compact(self, name: str, rng: random.Random) -> None:
        """Kafka's log cleaner on topic ``name`` (if compacted): in a prefix of each log, a
        record is removed when a later record has its key; tombstones may go too. The last
        record stays: Kafka never cleans the active segment, which holds it."""
        topic = self.topics.get(name)
        if topic is None or "compact" not in topic.configs.get("cleanup.policy", ""):
            return
        for log in topic.partitions:
            if not log.records:
                continue
            cut = min(rng.randint(log.start, log.end), log.records[-1].offset)
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

    def clean(
        self, name: str, rng: random.Random, now_ms: int, committed: dict[int, int]
    ) -> list[StoredRecord]:
        """Kafka's log cleaner on an input topic marked compacted: one pass over every
        partition up to a common cleanable point (the partitions' ends at a random earlier
        moment, never past a partition's last stable offset nor into its active segment, the
        segment of its last record). Below it, a record is removed when a later record of
        its partition below it has its key (only records of ended transactions count; those
        of aborted ones go); a tombstone (a null value) that is the last of its key goes once it
        is ``delete.retention.ms`` old and the group (``committed``: each partition's next
        offset) has read past it (the retention is longer than the app's lag). Offsets keep
        their gaps. The records removed, in offset order per partition."""
        topic = self.topics.get(name)
        if topic is None or "compact" not in topic.configs.get("cleanup.policy", ""):
            return []
        retention_ms = int(topic.configs.get("delete.retention.ms", "86400000"))
        written = self.written.get(name, [])
        moment = rng.randint(0, len(written))
        cuts: dict[int, int] = {}
        for record in written[:moment]:
            cuts[record.partition] = record.offset + 1
        removed: list[StoredRecord] = []
        for index, log in enumerate(topic.partitions):
            if not log.records:
                continue
            cut = min(cuts.get(index, 0), self.stable_offset((name, index)), log.records[-1].offset)
            last: dict[bytes, int] = {}  # (the cleaner's offset map: below the cut only)
            for record in log.records:
                if record.offset < cut and record.key is not None and self.visible(record):
                    last[record.key] = record.offset
            kept = []
            for record in log.records:
                if record.offset < cut and self._cleaned(
                    record, last, now_ms, retention_ms, committed.get(index, 0)
                ):
                    removed.append(record)
                else:
                    kept.append(record)
            log.records = kept
        return removed

    def _cleaned(
        self,
        record: StoredRecord,
        last: dict[bytes, int],
        now_ms: int,
        retention_ms: int,
        committed: int,
    ) -> bool:
        """Whether the cleaner removes ``record`` (below the cleanable point): see ``clean``."""
        if record.marker is not None or record.key is None:
            return False
        if not self.visible(record):
            return record.transaction is not None and self.aborted(record)
        if last[record.key] != record.offset:
            return True
        old = now_ms - record.timestamp_ms >= retention_ms
        return record.value is None and old and record.offset < committed

    def delete_before(self, name: str, partition: int, offset: int) -> None:
        """Retention: records of ``name[partition]`` below ``offset`` are gone."""
        log = self.partition((name, partition))
        log.start = max(log.start, min(offset, log.end))
        log.records = [r for r in log.records if r.offset >= log.start]


def _no_delay(_topic: str, _key: bytes | None, _value: bytes | None) -> int:
    """A record happened when it was queued (``Broker.delay``)."""
    return 0
