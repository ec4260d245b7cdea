"""The Kafka clients a processor run reads its inputs and writes its outputs with.

Both are made here, in one place: the consumer of the app's group (the loop polls and commits
with it; the handoff coordinator reads committed offsets and commits F with it) and the
idempotent producer of outputs and dead letters.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, Producer

__all__ = ["RunClients"]


@dataclass(frozen=True)
class RunClients:
    """The consumer and the producer of one processor run."""

    consumer: Consumer
    producer: Producer

    @classmethod
    def open(cls, client: Mapping[str, Any], group_id: str, delivery_timeout_ms: int) -> RunClients:
        """The consumer of ``group_id`` (no automatic commits: offsets commit with the state)
        and a producer whose deliveries time out within the outputs' lease."""
        consumer = Consumer(
            {
                **client,
                "group.id": group_id,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
            }
        )
        producer = Producer(
            {
                **client,
                "enable.idempotence": True,
                "linger.ms": 5,
                "delivery.timeout.ms": delivery_timeout_ms,
            }
        )
        return cls(consumer, producer)
