"""A new consumer asks for metadata once before its first assignment, never again, also when
that request fails (an unreachable broker must not add a wait to every later assignment; a
review found a wait per assignment)."""

from __future__ import annotations

from unittest import mock

from confluent_kafka import KafkaException

from framework.kafka.confluent_consumer import ConfluentConsumer


def test_metadata_is_asked_for_once_even_when_it_fails() -> None:
    consumer = ConfluentConsumer(
        {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "log_level": 0}, "test"
    )
    real = consumer._consumer
    stand_in = mock.Mock(wraps=real)
    stand_in.list_topics.side_effect = KafkaException("unreachable")
    consumer._consumer = stand_in
    try:
        consumer.assign({("a", 0): 0})
        consumer.add({("a", 1): 0})
        consumer.assign({("b", 0): None})
        assert stand_in.list_topics.call_count == 1
        assert stand_in.assign.call_count == 2
    finally:
        consumer._consumer = real
        consumer.close()
