"""librdkafka's log lines go through Python logging, at levels that keep real errors visible."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import Producer

from framework.kafka.client_logs import LIBRDKAFKA_LOGGER, LibrdkafkaLog, with_logger

FORMAT = "%s [%s] %s"  # what confluent-kafka passes


def _logged(caplog: pytest.LogCaptureFixture, level: int, facility: str, text: str) -> int:
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger=LIBRDKAFKA_LOGGER.name):
        LibrdkafkaLog().log(level, FORMAT, facility, "rdkafka#producer-1", text)
    [record] = caplog.records
    assert record.name == "splitstate.librdkafka"
    assert record.getMessage() == f"{facility} [rdkafka#producer-1] {text}"
    return record.levelno


def test_connections_coming_and_going_are_debug(caplog: pytest.LogCaptureFixture) -> None:
    refused = "127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 failed: Connection refused"
    closed = "127.0.0.1:9/1: Disconnected: connection closed by peer: receive 0 after POLLIN"
    down = "1/1 brokers are down"
    assert _logged(caplog, logging.ERROR, "FAIL", refused) == logging.DEBUG
    assert _logged(caplog, logging.INFO, "FAIL", closed) == logging.DEBUG
    assert _logged(caplog, logging.ERROR, "ERROR", down) == logging.DEBUG


def test_other_errors_and_warnings_keep_their_level(caplog: pytest.LogCaptureFixture) -> None:
    sasl = "127.0.0.1:9/bootstrap: SASL authentication error: Authentication failed"
    assert _logged(caplog, logging.ERROR, "FAIL", sasl) == logging.ERROR
    hint = (
        "127.0.0.1:9/bootstrap: Disconnected while requesting ApiVersion: might be caused by "
        "incorrect security.protocol configuration (connecting to a SSL listener?)"
    )
    assert _logged(caplog, logging.ERROR, "FAIL", hint) == logging.ERROR
    poll = "Application maximum poll interval (300000ms) exceeded by 12ms"
    assert _logged(caplog, logging.WARNING, "MAXPOLL", poll) == logging.WARNING
    assert _logged(caplog, logging.INFO, "CONFWARN", "configuration note") == logging.INFO


def test_a_client_made_with_the_logger_logs_through_python(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # a port nothing listens on: librdkafka's "Connection refused" arrives on poll, as DEBUG
    producer = Producer(with_logger({"bootstrap.servers": "127.0.0.1:9"}))
    with caplog.at_level(logging.DEBUG, logger=LIBRDKAFKA_LOGGER.name):
        for _attempt in range(50):
            producer.poll(0.1)
            if caplog.records:
                break
    assert caplog.records, "no librdkafka line reached Python logging"
    assert all(r.name == "splitstate.librdkafka" for r in caplog.records)
    assert {r.levelno for r in caplog.records} == {logging.DEBUG}


def test_a_logger_given_in_the_settings_is_kept() -> None:
    mine = logging.getLogger("mine")
    assert with_logger({"logger": mine, "a": 1}) == {"logger": mine, "a": 1}
