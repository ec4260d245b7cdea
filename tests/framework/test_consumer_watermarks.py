"""A partition of a topic created a moment ago may have no leader yet: ``watermarks`` asks
again instead of failing (the fresh-clone CI once failed reading the topic registry right
after creating it: "Not leader for partition"); any other error is raised at once."""

from __future__ import annotations

from unittest import mock

import pytest
from confluent_kafka import KafkaError, KafkaException

from framework.kafka import KafkaIOError
from framework.kafka.confluent_consumer import ConfluentConsumer
from rebalance.positions import OffsetRange


def _consumer(answers: list[object]) -> tuple[ConfluentConsumer, mock.Mock]:
    consumer = ConfluentConsumer(
        {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "log_level": 0}, "test"
    )
    stand_in = mock.Mock(wraps=consumer._consumer)
    stand_in.get_watermark_offsets.side_effect = answers
    return consumer, stand_in


def test_a_partition_without_a_leader_yet_is_asked_again() -> None:
    no_leader = KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION))
    consumer, stand_in = _consumer([no_leader, no_leader, (0, 5)])
    real, consumer._consumer = consumer._consumer, stand_in
    try:
        assert consumer.watermarks([("t", 0)]) == {("t", 0): OffsetRange(0, 5)}
        assert stand_in.get_watermark_offsets.call_count == 3
    finally:
        consumer._consumer = real
        consumer.close()


def test_other_errors_are_raised_at_once() -> None:
    refused = KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    consumer, stand_in = _consumer([refused, (0, 5)])
    real, consumer._consumer = consumer._consumer, stand_in
    try:
        with pytest.raises(KafkaIOError):
            consumer.watermarks([("t", 0)])
        assert stand_in.get_watermark_offsets.call_count == 1
    finally:
        consumer._consumer = real
        consumer.close()
