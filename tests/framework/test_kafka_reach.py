"""A wrong ``bootstrap.servers`` is said early, with what was tried and the fix (found by a
new user: 30 s of waiting, then ``KafkaError{code=_ALL_BROKERS_DOWN,...}``), while a broker
that starts listening a few seconds late, or a server that is slow to answer, is waited for."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from framework.kafka import Clients
from framework.kafka.errors import KafkaUnreachableError
from framework.kafka.reach import REFUSED_SECONDS, check_reachable


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_refused_server_is_named_with_the_fix_well_before_the_request_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = free_port()  # nothing listens there
    monkeypatch.setenv("SPLITSTATE_KAFKA__BOOTSTRAP_SERVERS", f"127.0.0.1:{port}")
    clients = Clients({"bootstrap.servers": f"127.0.0.1:{port},nosuch.invalid:9092"})
    started = time.monotonic()
    with pytest.raises(KafkaUnreachableError) as raised:
        clients.read_log("any-topic")
    took = time.monotonic() - started
    assert took < REFUSED_SECONDS + 5 < 30, took
    message = str(raised.value)
    assert f"no Kafka broker answered at '127.0.0.1:{port},nosuch.invalid:9092'" in message
    assert f"127.0.0.1:{port}: Connect to ipv4#127.0.0.1:{port} failed: Connection refused" in (
        message
    )
    assert "nosuch.invalid:9092: Failed to resolve" in message
    assert "Fix: check kafka.bootstrap_servers" in message
    assert "KafkaError{" not in message


@contextmanager
def silent_server() -> Iterator[int]:
    """A server that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(server.getsockname()[1])
    finally:
        stop.set()
        thread.join()
        for connection in accepted:
            connection.close()
        server.close()


def test_a_server_that_accepts_but_is_slow_to_answer_gets_the_longer_wait() -> None:
    with silent_server() as port:
        started = time.monotonic()
        with pytest.raises(KafkaUnreachableError) as raised:
            check_reachable(
                {"bootstrap.servers": f"127.0.0.1:{port}"}, refused_seconds=1, answer_seconds=4
            )
        took = time.monotonic() - started
    assert 4 <= took < 7, took  # not cut short at refused_seconds
    assert "in 4s of trying" in str(raised.value)


@contextmanager
def late_forwarder(target: str, delay: float) -> Iterator[int]:
    """A port that refuses connections for ``delay`` seconds, then forwards to ``target``
    (a broker slow to start, as a client sees it)."""
    port = free_port()
    host, target_port = target.rsplit(":", 1)
    stop = threading.Event()
    sockets: list[socket.socket] = []

    def pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass

    def serve() -> None:
        if stop.wait(delay):
            return
        server = socket.create_server(("127.0.0.1", port))
        server.settimeout(0.2)
        sockets.append(server)
        while not stop.is_set():
            try:
                client = server.accept()[0]
            except TimeoutError:
                continue
            upstream = socket.create_connection((host, int(target_port)))
            sockets.extend([client, upstream])
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=pipe, args=(a, b), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        stop.set()
        thread.join()
        for opened in sockets:
            opened.close()


@pytest.mark.integration
def test_a_broker_that_starts_listening_late_is_found(kafka_bootstrap: str) -> None:
    with late_forwarder(kafka_bootstrap.split(",", maxsplit=1)[0], delay=4.0) as port:
        started = time.monotonic()
        check_reachable({"bootstrap.servers": f"127.0.0.1:{port}"})
        took = time.monotonic() - started
    assert 4.0 <= took < 6.5, took  # found within about a second of listening
