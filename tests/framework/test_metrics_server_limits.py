"""The metrics endpoint against clients that connect and send nothing (a real server socket):
it answers at most ``MAX_CONNECTIONS`` connections at once, closes the ones past them
unanswered, and closes a connection silent for ``IDLE_SECONDS``, so no client grows the
process's threads."""

from __future__ import annotations

import select
import socket
import threading
import time
import urllib.error
import urllib.request

from framework.metrics import ProcessorMetrics
from framework.metrics.server import MAX_CONNECTIONS, MAX_PER_CLIENT, MetricsServer
from tests.integration.harness import wait_for

#: how long a test waits for the server to close a connection before it calls it hung
_GUARD_SECONDS = 60.0


def _connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    """A connection to the server from ``source`` (any address of 127/8 is this machine's)."""
    return socket.create_connection(
        ("127.0.0.1", port), timeout=_GUARD_SECONDS, source_address=(source, 0)
    )


def _closed_unanswered(connection: socket.socket) -> bool:
    """Whether the server closed ``connection`` without a byte of answer (a hung read
    raises ``TimeoutError`` after the guard)."""
    try:
        return connection.recv(100) == b""
    except ConnectionResetError:
        return True


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as answer:
            return int(answer.status) == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def test_connections_past_the_bound_are_closed_and_the_threads_stay_bounded() -> None:
    server = MetricsServer(ProcessorMetrics("sim", 0), "127.0.0.1", 0).start()
    idle: list[socket.socket] = []
    try:
        before = threading.active_count()
        for n in range(MAX_CONNECTIONS):
            connection = _connect(server.port)
            if n % 2:
                connection.sendall(b"GET /metr")  # half a request line, never finished
            idle.append(connection)
        # the server takes connections in order: past the bound, each is closed unanswered
        for _ in range(3 * MAX_CONNECTIONS):
            with _connect(server.port) as extra:
                assert _closed_unanswered(extra)
        assert threading.active_count() <= before + MAX_CONNECTIONS
        for connection in idle:
            connection.close()
        idle.clear()
        # their threads end, and the endpoint answers again
        wait_for(lambda: threading.active_count() <= before, _GUARD_SECONDS, "threads to end")
        assert _healthy(server.port)
    finally:
        for connection in idle:
            connection.close()
        server.stop()


def test_a_silent_connection_is_closed_and_its_thread_ends() -> None:
    server = MetricsServer(ProcessorMetrics("sim", 0), "127.0.0.1", 0).start()
    try:
        before = threading.active_count()
        with _connect(server.port) as silent, _connect(server.port) as half:
            half.sendall(b"GET /metr")
            assert _closed_unanswered(silent)
            assert _closed_unanswered(half)
        wait_for(lambda: threading.active_count() <= before, _GUARD_SECONDS, "threads to end")
        assert _healthy(server.port)
    finally:
        server.stop()


def test_one_client_address_cannot_keep_the_others_out() -> None:
    server = MetricsServer(ProcessorMetrics("sim", 0), "127.0.0.1", 0).start()
    held: list[socket.socket] = []
    try:
        # as many as the server answers in all: it takes MAX_PER_CLIENT of them
        for _ in range(MAX_CONNECTIONS):
            connection = _connect(server.port, source="127.0.0.2")
            connection.sendall(b"GET /metr")  # never finished
            held.append(connection)
        assert MAX_PER_CLIENT < MAX_CONNECTIONS
        assert _healthy(server.port)  # from 127.0.0.1, before the idle ones time out
    finally:
        for connection in held:
            connection.close()
        server.stop()


def test_a_connection_sending_its_request_a_byte_at_a_time_is_closed() -> None:
    # each byte comes well within IDLE_SECONDS: only the connection's own deadline ends it
    server = MetricsServer(ProcessorMetrics("sim", 0), "127.0.0.1", 0).start()
    try:
        with _connect(server.port) as trickle:
            guard = time.monotonic() + _GUARD_SECONDS
            closed = False
            while not closed and time.monotonic() < guard:
                try:
                    trickle.sendall(b"G")
                except (BrokenPipeError, ConnectionResetError):
                    closed = True
                    break
                readable, _, _ = select.select([trickle], [], [], 0.5)
                closed = bool(readable) and _closed_unanswered(trickle)
            assert closed, "the server kept a trickling connection open"
        assert _healthy(server.port)
    finally:
        server.stop()
