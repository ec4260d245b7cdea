"""A ``ConfluentConsumer`` whose confluent-kafka consumer answers one method from a list:
broker answers that cannot be made on demand on a one-node broker."""

from __future__ import annotations

from unittest import mock

from framework.kafka.confluent_consumer import ConfluentConsumer


def consumer_answering(method: str, answers: list[object]) -> tuple[ConfluentConsumer, mock.Mock]:
    """A consumer (of no reachable broker) whose ``method`` calls return or raise ``answers``
    in turn; the stand-in records the calls, and closing closes the real consumer."""
    consumer = ConfluentConsumer(
        {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "log_level": 0}, "test"
    )
    real = consumer._consumer
    stand_in = mock.Mock(wraps=real)
    getattr(stand_in, method).side_effect = answers
    consumer._consumer = stand_in
    stand_in.close.side_effect = real.close
    return consumer, stand_in
