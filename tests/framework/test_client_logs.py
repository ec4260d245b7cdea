"""librdkafka's log lines go through Python logging, at levels that keep real errors visible."""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import threading
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from framework.kafka.client_logs import LIBRDKAFKA_LOGGER, LibrdkafkaLog, with_logger

FORMAT = "%s [%s] %s"  # what confluent-kafka passes


def _logged(
    caplog: pytest.LogCaptureFixture,
    level: int,
    facility: str,
    text: str,
    log: LibrdkafkaLog | None = None,
) -> int:
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger=LIBRDKAFKA_LOGGER.name):
        (log or LibrdkafkaLog()).log(level, FORMAT, facility, "rdkafka#producer-1", text)
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
    # as librdkafka writes them: the broker's state when it failed at the end
    refused_now = f"{refused} (after 0ms in state CONNECT)"
    closed_now = f"{closed} (after 61234ms in state UP, 3 identical error(s) suppressed)"
    assert _logged(caplog, logging.ERROR, "FAIL", refused_now) == logging.DEBUG
    assert _logged(caplog, logging.WARNING, "FAIL", closed_now) == logging.DEBUG


#: found in review: a plaintext client pointed at a TLS listener
RESET = (
    "[thrd:127.0.0.1:9093/bootstrap]: 127.0.0.1:9093/bootstrap: Disconnected: connection "
    "reset by peer (after 0ms in state APIVERSION_QUERY)"
)


def test_a_disconnection_before_the_connection_is_up_is_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert _logged(caplog, logging.INFO, "FAIL", RESET) == logging.WARNING
    assert _logged(caplog, logging.ERROR, "FAIL", RESET) == logging.ERROR
    for state in ("SSL_HANDSHAKE", "AUTH_HANDSHAKE", "AUTH_REQ", "AUTH_LEGACY", "REAUTH"):
        closed = f"10.0.0.1:9094/2: Disconnected (after 3ms in state {state})"
        assert _logged(caplog, logging.INFO, "FAIL", closed) == logging.WARNING, state


def test_a_failing_handshake_warns_once_per_broker_per_minute(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [1000.0]
    log = LibrdkafkaLog(clock=lambda: now[0])
    other = RESET.replace("127.0.0.1:9093/bootstrap", "127.0.0.1:9094/2")
    unnamed = RESET.replace("[thrd:127.0.0.1:9093/bootstrap]: ", "")  # the same broker
    assert _logged(caplog, logging.INFO, "FAIL", RESET, log) == logging.WARNING
    now[0] += 1.0  # librdkafka reconnects and fails again: shown at DEBUG only
    assert _logged(caplog, logging.INFO, "FAIL", RESET, log) == logging.DEBUG
    assert _logged(caplog, logging.INFO, "FAIL", unnamed, log) == logging.DEBUG
    assert _logged(caplog, logging.INFO, "FAIL", other, log) == logging.WARNING
    now[0] += 58.5
    assert _logged(caplog, logging.INFO, "FAIL", RESET, log) == logging.DEBUG
    now[0] += 0.5  # a minute after the first
    assert _logged(caplog, logging.INFO, "FAIL", RESET, log) == logging.WARNING


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


@pytest.fixture
def resetting_port() -> Iterator[int]:
    """A port whose listener resets each connection once the client has spoken (as a TLS
    listener does to a plaintext client's ApiVersion request)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _address = listener.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(2.0)
                with contextlib.suppress(OSError):
                    connection.recv(100)
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    yield listener.getsockname()[1]
    stop.set()
    server.join()
    listener.close()


def test_a_client_at_a_listener_that_resets_it_warns(
    caplog: pytest.LogCaptureFixture, resetting_port: int
) -> None:
    settings = {"bootstrap.servers": f"127.0.0.1:{resetting_port}"}
    producer = Producer(with_logger({**settings, "logger": LibrdkafkaLog()}))
    with caplog.at_level(logging.INFO, logger=LIBRDKAFKA_LOGGER.name):
        for _attempt in range(100):
            producer.poll(0.1)
            if caplog.records:
                break
    [record, *_] = caplog.records
    assert record.levelno == logging.WARNING
    assert "in state APIVERSION_QUERY" in record.getMessage()


def test_a_logger_given_in_the_settings_is_kept() -> None:
    mine = logging.getLogger("mine")
    assert with_logger({"logger": mine, "a": 1}) == {"logger": mine, "a": 1}
