"""``committed`` never takes a partition Kafka answered with an error for one without an
offset (issue 32): the group would look as if it never processed it (a lost state directory
then looks fresh; a catch-up's T1 stands still). It asks again, then fails naming it.

confluent-kafka's ``committed`` returns such partitions with ``error`` set (librdkafka itself
retries UNSTABLE_OFFSET_COMMIT, a broker state that cannot be produced on demand for one
partition alone): a stand-in answers here."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError

from framework.kafka import KafkaIOError, confluent_consumer
from tests.framework.stand_in import consumer_answering

UNSTABLE = KafkaError(KafkaError.UNSTABLE_OFFSET_COMMIT)


def _answer(*partitions: tuple[int, int, KafkaError | None]) -> list[SimpleNamespace]:
    return [
        SimpleNamespace(topic="t", partition=p, offset=offset, error=error)
        for p, offset, error in partitions
    ]


def test_a_partition_answered_with_an_error_is_asked_again() -> None:
    consumer, stand_in = consumer_answering(
        "committed",
        [
            _answer((0, 7, None), (1, -1001, UNSTABLE), (2, -1001, None)),
            _answer((1, 9, None)),
        ],
    )
    try:
        assert consumer.committed([("t", 0), ("t", 1), ("t", 2)]) == {("t", 0): 7, ("t", 1): 9}
        asked = [[tp.partition for tp in call.args[0]] for call in stand_in.committed.mock_calls]
        assert asked == [[0, 1, 2], [1]]
    finally:
        consumer.close()


def test_an_error_that_stays_fails_naming_the_partition(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(confluent_consumer, "TIMEOUT", 0.3)
    consumer, _stand_in = consumer_answering(
        "committed", [_answer((0, 7, None), (1, -1001, UNSTABLE))] * 100
    )
    try:
        with pytest.raises(KafkaIOError, match=r"t\[1\]: .*unstable offsets"):
            consumer.committed([("t", 0), ("t", 1)])
    finally:
        consumer.close()
