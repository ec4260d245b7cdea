"""Reading what a consumer has now, through any ``KafkaConsumer``: ``consume_ready``."""

from __future__ import annotations

from framework.kafka.port import KafkaConsumer, Message

__all__ = ["consume_ready"]


def consume_ready(consumer: KafkaConsumer, max_records: int, timeout: float) -> list[Message]:
    """Up to ``max_records`` records of ``consumer``, returned as soon as any is there: its own
    ``consume_ready`` where it has one (confluent-kafka's ``consume`` waits out ``timeout``
    for a batch of ``max_records`` to fill), else its ``consume`` (the in-memory consumer's
    returns what it has)."""
    ready = getattr(consumer, "consume_ready", None)
    if ready is None:
        return consumer.consume(max_records, timeout)
    records: list[Message] = ready(max_records, timeout)
    return records
