"""The Kafka clients a processor run reads its inputs and writes its outputs with.

Both are made here, in one place, from the Kafka port: the consumer of the app's group (the
loop polls and commits with it; the handoff coordinator reads committed offsets and commits F
with it) and the idempotent producer of outputs and dead letters.
"""

from __future__ import annotations

from dataclasses import dataclass

from framework.kafka import Kafka, KafkaConsumer, KafkaProducer

__all__ = ["RunClients"]


@dataclass(frozen=True)
class RunClients:
    """The consumer and the producer of one processor run."""

    consumer: KafkaConsumer
    producer: KafkaProducer

    @classmethod
    def open(cls, kafka: Kafka, group_id: str, delivery_timeout_ms: int) -> RunClients:
        """The consumer of ``group_id`` (no automatic commits: offsets commit with the state)
        and a producer whose deliveries time out within the outputs' lease."""
        # every partition is read from an explicit offset; one Kafka no longer holds (records
        # deleted by retention before they were read) raises instead of being skipped
        consumer = kafka.consumer(group_id, reset="error", store_offsets=False)
        try:
            producer = kafka.producer(linger_ms=5, delivery_timeout_ms=delivery_timeout_ms)
        except BaseException:
            consumer.close()
            raise
        return cls(consumer, producer)
