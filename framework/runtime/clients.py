"""The Kafka clients a processor run reads its inputs and writes its outputs with.

Both are made here, in one place, from the Kafka port: the consumer of the app's group (the
loop polls and commits with it; the handoff coordinator reads committed offsets and commits F
with it) and the producer of outputs and dead letters: idempotent, or, under exactly-once,
transactional with an id fixed per processor (a later instance of the processor fences an
earlier one).
"""

from __future__ import annotations

from dataclasses import dataclass

from framework.kafka import (
    Kafka,
    KafkaConsumer,
    KafkaIOError,
    KafkaProducer,
    TransactionalProducer,
)

__all__ = ["RunClients", "transactional_id"]


def transactional_id(app_id: str, processor: int) -> str:
    """The transactional id of processor ``processor``'s output producer."""
    return f"{app_id}-splitstate-processor-{processor}"


@dataclass(frozen=True)
class RunClients:
    """The consumer and the producer of one processor run (``transactions``: the same
    producer, when it writes in transactions)."""

    consumer: KafkaConsumer
    producer: KafkaProducer
    transactions: TransactionalProducer | None = None

    @classmethod
    def open(
        cls,
        kafka: Kafka,
        group_id: str,
        delivery_timeout_ms: int,
        transactional: str | None = None,
        batch_bytes: int | None = None,
    ) -> RunClients:
        """The consumer of ``group_id`` (no automatic commits: offsets commit with the state)
        and a producer whose deliveries time out within the outputs' lease (``batch_bytes``:
        its ``batch.size``); with ``transactional`` (an id), a transactional one."""
        # every partition is read from an explicit offset; one Kafka no longer holds (records
        # deleted by retention before they were read) raises instead of being skipped
        consumer = kafka.consumer(group_id, reset="error", store_offsets=False)
        settings = None if batch_bytes is None else {"batch.size": batch_bytes}
        try:
            if transactional is None:
                producer = kafka.producer(
                    linger_ms=5, delivery_timeout_ms=delivery_timeout_ms, settings=settings
                )
                return cls(consumer, producer)
            try:
                transactions = kafka.transactional_producer(
                    transactional,
                    linger_ms=5,
                    delivery_timeout_ms=delivery_timeout_ms,
                    settings=settings,
                )
            except KafkaIOError as error:
                raise KafkaIOError(
                    f"could not start Kafka transactions for exactly-once outputs (producer "
                    f"{transactional!r}): {error}. Fix: use a broker that supports "
                    "transactions (a single-node broker needs "
                    "transaction.state.log.replication.factor=1 and "
                    "transaction.state.log.min.isr=1; `splitstate broker start` sets them) and "
                    "lets this principal write its transactional id; keep transaction.timeout.ms "
                    "(at least the topics' delivery timeout) under the broker's "
                    "transaction.max.timeout.ms (15 min by default); or set "
                    "processing_guarantee: at-least-once."
                ) from None
            return cls(consumer, transactions, transactions)
        except BaseException:
            consumer.close()
            raise
