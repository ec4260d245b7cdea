"""``MemoryTransactionalProducer``: the port's transactional producer over a simulated broker.

The model keeps what a ``read_committed`` consumer can observe of Kafka transactions: records
produced in a transaction are checked as any write is (a refusal is reported to their delivery
callback and fails the transaction) but held back; ``commit`` appends them all and updates the
group offsets sent with them, at once; ``abort``, a crash of the process, or a later producer
with the same transactional id (which fences this one) drops them. Offsets are assigned at the
commit (Kafka assigns them at the write, and leaves the aborted ones as gaps): nothing here
reads offsets of uncommitted records.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from framework.kafka import (
    DeliveryError,
    KafkaConsumer,
    KafkaIOError,
    Message,
    ProducerFencedError,
    TransactionAbortableError,
)
from rebalance.positions import Position
from tests.sim.broker import StoredRecord
from tests.sim.producer import MemoryProducer, SimMessage, _Queued

if TYPE_CHECKING:
    from tests.sim.kafka import MemoryKafka

__all__ = ["MemoryTransactionalProducer"]


class MemoryTransactionalProducer(MemoryProducer):
    """A transactional ``MemoryProducer`` (see the module); made with the id's next epoch."""

    def __init__(
        self,
        kafka: MemoryKafka,
        transactional_id: str,
        max_bytes: int,
        timeout_ms: int,
        max_queued: int,
    ) -> None:
        super().__init__(kafka, max_bytes, timeout_ms, max_queued)
        epochs = kafka.broker.transactional_epochs
        self.transactional_id = transactional_id
        self.epoch = epochs[transactional_id] = epochs.get(transactional_id, 0) + 1
        self._open = False
        #: the open transaction's records and group offsets
        self._records: list[tuple[Position, dict[str, Any]]] = []
        self._offsets: dict[str, dict[Position, int]] = {}
        self._failed: DeliveryError | None = None

    def _check_epoch(self, during: str) -> None:
        if self._kafka.broker.transactional_epochs.get(self.transactional_id) != self.epoch:
            raise ProducerFencedError(
                f"{during} failed: producer {self.transactional_id!r} epoch {self.epoch} was "
                "fenced by a newer one"
            )

    def begin(self) -> None:
        """Open a transaction."""
        self._kafka.before("producer.begin")
        self._check_epoch("beginning a transaction")
        if self._open:
            raise KafkaIOError("a transaction is already open")
        self._open, self._records, self._offsets, self._failed = True, [], {}, None

    def send_offsets(self, offsets: Mapping[Position, int], consumer: KafkaConsumer) -> None:
        """Add the group's next offsets to the open transaction."""
        self._kafka.before("producer.send_offsets")
        self._check_epoch("sending offsets to the transaction")
        group = str(consumer.group_metadata())
        self._offsets.setdefault(group, {}).update(offsets)

    def commit(self, timeout: float) -> None:
        """Flush, then append every held record and commit the offsets at once (``after``
        faults: it committed, the call reports a failure)."""
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
        for position, record in self._records:
            broker.append(position, record)
        for group, offsets in self._offsets.items():
            broker.groups.setdefault(group, {}).update(offsets)
        self._open, self._records, self._offsets = False, [], {}
        # a switch point (where a kill lands) between the commit and the caller's next step:
        # for a processor, between its transaction and its state's RocksDB write
        self._kafka.before("producer.committed")
        if after:
            raise KafkaIOError("committing a transaction timed out (it committed)")

    def abort(self, timeout: float) -> None:
        """Drop the open transaction."""
        self._kafka.before("producer.abort")
        self.queue.clear()
        self._open, self._records, self._offsets, self._failed = False, [], {}, None

    def _write(self, item: _Queued) -> tuple[DeliveryError | None, Message]:
        """Outside a transaction, a write; inside, held until the commit."""
        if not self._open:
            return super()._write(item)
        refused = self._refusal(item)
        if refused is not None:
            self._failed = self._failed or refused[0]
            return refused
        self._records.append((item.position, item.record))
        topic, partition = item.position
        return None, SimMessage(StoredRecord(topic, partition, -1, **item.record))

    def crash(self, rng: random.Random) -> None:
        """The process died: the open transaction is lost (Kafka aborts it)."""
        self.queue.clear()
        self._open, self._records, self._offsets = False, [], {}
