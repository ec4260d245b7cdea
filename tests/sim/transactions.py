"""``MemoryTransactionalProducer``: the port's transactional producer over a simulated broker.

As in Kafka, a record produced in a transaction is written (it takes its offset) as soon as
it is sent, in the broker's open transaction (``tests/sim/broker.py``): ``read_committed``
consumers do not read it, nor anything after it in its partition, until the transaction
ends. ``commit`` writes a COMMIT marker to each partition the transaction wrote to and
commits the group offsets sent with it, at once; ``abort`` writes ABORT markers. Records are
checked as any write is (a refusal is reported to their delivery callback and fails the
transaction). A later producer with the same transactional id fences this one and aborts
what it left open; so does the broker once the transaction ran longer than its timeout
(``transaction.timeout.ms``; librdkafka then reports the producer fenced too). A fenced
producer's records never land: its commit raises ``ProducerFencedError``. A crash of the
process leaves its transaction open until one of those two aborts it.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import TYPE_CHECKING

from framework.kafka import (
    DeliveryError,
    KafkaConsumer,
    KafkaIOError,
    Message,
    ProducerFencedError,
    TransactionAbortableError,
)
from rebalance.positions import Position
from tests.sim.broker import StoredRecord, Transaction
from tests.sim.producer import MemoryProducer, SimMessage, _Queued

if TYPE_CHECKING:
    from tests.sim.kafka import MemoryKafka

__all__ = ["MemoryTransactionalProducer"]


class MemoryTransactionalProducer(MemoryProducer):
    """A transactional ``MemoryProducer`` (see the module); made with the id's next epoch,
    its transactions aborted by the broker after ``transaction_timeout_ms``."""

    def __init__(
        self,
        kafka: MemoryKafka,
        transactional_id: str,
        max_bytes: int,
        timeout_ms: int,
        max_queued: int,
        *,
        transaction_timeout_ms: int = 60_000,
    ) -> None:
        super().__init__(kafka, max_bytes, timeout_ms, max_queued)
        broker = kafka.broker
        epochs = broker.transactional_epochs
        self.transactional_id = transactional_id
        self.epoch = epochs[transactional_id] = epochs.get(transactional_id, 0) + 1
        # init_transactions: what an earlier producer of the id left open is aborted
        broker.abort_transactions_of(transactional_id, int(kafka.clock.time() * 1000))
        self._transaction_seconds = transaction_timeout_ms / 1000
        self._open = False
        #: the broker's transaction, once the open one wrote a record or sent offsets
        self._transaction: Transaction | None = None
        #: the open transaction's group offsets
        self._offsets: dict[str, dict[Position, int]] = {}
        self._failed: DeliveryError | None = None
        #: records written in the open transaction so far
        self.written = 0

    def _fenced(self) -> bool:
        broker = self._kafka.broker
        if broker.transactional_epochs.get(self.transactional_id) != self.epoch:
            return True
        transaction = self._transaction
        if transaction is not None and transaction.state == "aborted":
            # the broker aborted it (its timeout ran out): the epoch moves on, as Kafka's
            # coordinator bumps it, and librdkafka reports the producer fenced
            broker.transactional_epochs[self.transactional_id] = self.epoch + 1
            return True
        return False

    def _check_epoch(self, during: str) -> None:
        if self._fenced():
            raise ProducerFencedError(
                f"{during} failed: producer {self.transactional_id!r} epoch {self.epoch} was "
                "fenced by a newer one"
            )

    def _started(self) -> Transaction:
        """The broker's transaction of the open one (begun at its first write, as Kafka's
        coordinator starts the timeout at the first partition added)."""
        if self._transaction is None:
            kafka = self._kafka
            self._transaction = kafka.broker.begin_transaction(
                self.transactional_id,
                kafka.name,
                kafka.clock.monotonic() + self._transaction_seconds,
            )
        return self._transaction

    def begin(self) -> None:
        """Open a transaction."""
        self._kafka.before("producer.begin")
        self._check_epoch("beginning a transaction")
        if self._open:
            raise KafkaIOError("a transaction is already open")
        self._open, self._transaction, self._offsets, self._failed = True, None, {}, None
        self.written = 0

    def send_offsets(self, offsets: Mapping[Position, int], consumer: KafkaConsumer) -> None:
        """Add the group's next offsets to the open transaction."""
        self._kafka.before("producer.send_offsets")
        self._check_epoch("sending offsets to the transaction")
        self._started()
        group = str(consumer.group_metadata())
        self._offsets.setdefault(group, {}).update(offsets)

    def commit(self, timeout: float) -> None:
        """Flush, then end the transaction with COMMIT markers and commit its offsets at once
        (``after`` faults: it committed, the call reports a failure)."""
        self.flush(timeout)
        after = self._kafka.before("producer.commit") == "after"
        self._check_epoch("committing a transaction")
        if self._failed is not None or self.queue:
            raise TransactionAbortableError(
                f"committing a transaction failed: {self._failed or 'records not delivered'}"
            )
        if self._kafka.faults.unreachable(self._kafka.name):
            raise TransactionAbortableError("committing a transaction failed: timed out")
        broker = self._kafka.broker
        if self._transaction is not None:
            broker.end_transaction(self._transaction, True, self._now_ms())
        for group, offsets in self._offsets.items():
            broker.groups.setdefault(group, {}).update(offsets)
        self._open, self._transaction, self._offsets = False, None, {}
        # a switch point (where a kill lands) between the commit and the caller's next step:
        # for a processor, between its transaction and its state's RocksDB write
        self._kafka.before("producer.committed")
        if after:
            raise KafkaIOError("committing a transaction timed out (it committed)")

    def abort(self, timeout: float) -> None:
        """Abort the open transaction: ABORT markers where it wrote."""
        self._kafka.before("producer.abort")
        self.queue.clear()
        if self._transaction is not None and not self._fenced():
            self._kafka.broker.end_transaction(self._transaction, False, self._now_ms())
        self._open, self._transaction, self._offsets, self._failed = False, None, {}, None

    def _now_ms(self) -> int:
        return int(self._kafka.clock.time() * 1000)

    def _write(self, item: _Queued) -> tuple[DeliveryError | None, Message]:
        """Outside a transaction, a write; inside, a write in the open transaction (a fenced
        producer's never lands: its commit fails)."""
        if not self._open:
            return super()._write(item)
        refused = self._refusal(item)
        if refused is not None:
            self._failed = self._failed or refused[0]
            return refused
        if self._fenced():
            topic, partition = item.position
            return None, SimMessage(StoredRecord(topic, partition, -1, **item.record))
        stored = self._kafka.broker.append(item.position, item.record, self._started())
        self.written += 1
        return None, SimMessage(stored)

    def crash(self, rng: random.Random) -> None:
        """The process died: what it queued is lost; its open transaction stays open until
        a newer producer of its id or the transaction timeout aborts it."""
        self.queue.clear()
        self._open, self._transaction, self._offsets = False, None, {}
