"""A synchronous ``commit`` outlasts a moment without the group's coordinator (review of
issue 32's item 7): librdkafka sends a failed commit again only twice, ``retry.backoff.ms``
apart, which is 30 ms at the 10 ms splitstate's consumers set; an old owner's release (its
F) and an assignment's commits then failed, and the run restarted, on a coordinator that was
loading or moving. The consumer asks again for up to ``COMMIT_RETRY_SECONDS``.

Such errors cannot be made on demand on a one-node broker: a stand-in answers here."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from framework.kafka import KafkaIOError, confluent_consumer
from tests.framework.stand_in import consumer_answering

LOADING = KafkaException(KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS))
DENIED = KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED))


def test_a_commit_the_coordinator_could_not_take_is_sent_again() -> None:
    consumer, stand_in = consumer_answering("commit", [LOADING, LOADING, None])
    try:
        consumer.commit({("t", 0): 7})
        sent = [
            [(tp.topic, tp.partition, tp.offset) for tp in call.kwargs["offsets"]]
            for call in stand_in.commit.mock_calls
        ]
        assert sent == [[("t", 0, 7)]] * 3
    finally:
        consumer.close()


def test_other_errors_fail_at_once_and_a_lasting_one_in_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    consumer, stand_in = consumer_answering("commit", [DENIED])
    try:
        with pytest.raises(KafkaIOError, match="GROUP_AUTHORIZATION_FAILED"):
            consumer.commit({("t", 0): 7})
        assert stand_in.commit.call_count == 1
    finally:
        consumer.close()
    monkeypatch.setattr(confluent_consumer, "COMMIT_RETRY_SECONDS", 0.3)
    consumer, stand_in = consumer_answering("commit", [LOADING] * 100)
    try:
        with pytest.raises(KafkaIOError, match="COORDINATOR_LOAD_IN_PROGRESS"):
            consumer.commit({("t", 0): 7})
        assert 2 <= stand_in.commit.call_count < 100
    finally:
        consumer.close()
