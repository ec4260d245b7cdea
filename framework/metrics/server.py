"""The processor's HTTP endpoint: ``/metrics`` (Prometheus text), ``/healthz``, ``/readyz``.

Served by prometheus_client's WSGI app (``make_wsgi_app`` over the processor's own registry)
plus the two health routes, on a threaded ``wsgiref`` server in a daemon thread, bound to
``metrics.host``. Health routes answer 200 or 503 with a one-line text body.

Whoever reaches the port cannot make the process grow, nor keep others out from one
address: each connection is answered in a thread of its own, at most ``MAX_CONNECTIONS`` at
once and ``MAX_PER_CLIENT`` of one client address (a connection past them is closed
unanswered); one silent for ``IDLE_SECONDS`` (sending no request, or not taking its answer)
is closed, and so is one still open ``REQUEST_SECONDS`` after it was accepted (a client
sending its request a byte at a time). prometheus_client's own server bounds none of it,
hence this one.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from prometheus_client import make_wsgi_app

from framework.errors import SplitstateError
from framework.metrics.processor import ProcessorMetrics

__all__ = [
    "IDLE_SECONDS",
    "MAX_CONNECTIONS",
    "MAX_PER_CLIENT",
    "REQUEST_SECONDS",
    "MetricsPortError",
    "MetricsServer",
]

log = logging.getLogger(__name__)

#: connections answered at once (a thread each); one past them is closed unanswered
MAX_CONNECTIONS = 16
#: connections of one client address answered at once
MAX_PER_CLIENT = MAX_CONNECTIONS // 2
#: seconds a connection may stay silent (its request not sent, its answer not taken)
IDLE_SECONDS = 5.0
#: seconds a connection may stay open in all (a scrape takes milliseconds)
REQUEST_SECONDS = 10.0
#: at most one warning about refused connections per this many seconds
_REFUSED_NOTE_SECONDS = 60.0

StartResponse = Callable[..., Any]
Environ = dict[str, Any]


class MetricsPortError(SplitstateError):
    """The metrics endpoint cannot listen on its host and port."""


class _BoundedWSGIServer(ThreadingMixIn, WSGIServer):
    """A WSGI server answering each connection in a (daemon) thread of its own, at most
    ``limit`` at once and ``per_client`` of one address: a connection past them is closed
    unanswered, and a warning says so (at most once a minute). Between its polls the serving
    thread shuts down connections open longer than ``REQUEST_SECONDS``."""

    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], limit: int, per_client: int, processor: int
    ) -> None:
        super().__init__(address, _QuietHandler)
        self._limit = limit
        self._per_client = per_client
        self._processor = processor
        self._refused = 0
        self._noted = -_REFUSED_NOTE_SECONDS
        self._lock = threading.Lock()
        #: each open connection: its client's address and when it must be closed
        self._open: dict[Any, tuple[str, float]] = {}

    def process_request(self, request: Any, client_address: Any) -> None:
        client = str(client_address[0]) if client_address else "?"
        with self._lock:
            clients = [c for c, _ in self._open.values()]
            full = len(clients) >= self._limit or clients.count(client) >= self._per_client
            if not full:
                self._open[request] = (client, time.monotonic() + REQUEST_SECONDS)
        if full:
            self._note_refused(client)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._forget(request)  # no thread took it
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._forget(request)

    def service_actions(self) -> None:
        """Shut down connections open past their deadline (their threads then end)."""
        now = time.monotonic()
        with self._lock:
            late = [request for request, (_, due) in self._open.items() if due <= now]
        for request in late:
            with contextlib.suppress(OSError):
                request.shutdown(socket.SHUT_RDWR)

    def _forget(self, request: Any) -> None:
        with self._lock:
            self._open.pop(request, None)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that failed (timed out, reset): the client's affair, not an error of
        the processor's."""
        log.debug("metrics connection from %s ended: %r", client_address, sys.exc_info()[1])

    def _note_refused(self, client: str) -> None:
        self._refused += 1
        now = time.monotonic()
        if now - self._noted >= _REFUSED_NOTE_SECONDS:
            self._noted = now
            log.warning(
                "processor %d's metrics endpoint closed a connection from %s unanswered: it "
                "answers at most %d at once, %d of one address (%d refused so far; a client "
                "that opens connections and sends nothing?)",
                self._processor,
                client,
                self._limit,
                self._per_client,
                self._refused,
            )


class _QuietHandler(WSGIRequestHandler):
    """No access log line per scrape; a connection silent for ``IDLE_SECONDS`` is closed."""

    timeout = IDLE_SECONDS

    def log_message(self, format: str, *args: Any) -> None:
        return


class MetricsServer:
    """Serves ``metrics`` on ``host``:``port`` (``port`` 0: any free port) once ``start``ed."""

    def __init__(self, metrics: ProcessorMetrics, host: str, port: int) -> None:
        self.metrics = metrics
        self.host = host
        self.requested_port = port
        self._scrape = make_wsgi_app(metrics.registry)
        self._server: _BoundedWSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port it listens on (the one picked for ``port`` 0)."""
        if self._server is None:
            return self.requested_port
        return int(self._server.server_address[1])

    def start(self) -> MetricsServer:
        """Listen and serve in a daemon thread; ``MetricsPortError`` when the port is taken."""
        try:
            server = _BoundedWSGIServer(
                (self.host, self.requested_port),
                MAX_CONNECTIONS,
                MAX_PER_CLIENT,
                self.metrics.processor,
            )
        except OSError as error:
            raise self._port_error(error) from None
        server.set_app(self._app)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.2},
            name=f"splitstate-metrics-{self.metrics.processor}",
            daemon=True,
        )
        self._thread.start()
        log.info(
            "processor %d: metrics on http://%s:%d/metrics (health: /healthz, /readyz)",
            self.metrics.processor,
            self.host,
            self.port,
        )
        return self

    def stop(self) -> None:
        """Stop serving and free the port (again: nothing)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _port_error(self, error: OSError) -> MetricsPortError:
        where = f"{self.host}:{self.requested_port}"
        if error.errno == errno.EADDRINUSE:
            return MetricsPortError(
                f"processor {self.metrics.processor} cannot serve metrics on {where}: the port "
                "is in use (another process, or another processor with the same port: under "
                "`splitstate run --all` processor j listens on metrics.port + j). Fix: set "
                "metrics.port (or SPLITSTATE_METRICS__PORT) to a free port, or stop what holds "
                "it."
            )
        return MetricsPortError(
            f"processor {self.metrics.processor} cannot serve metrics on {where}: {error}. "
            "Fix: set metrics.host to an address of this machine (127.0.0.1, or 0.0.0.0 for "
            "every interface) and metrics.port to a port it may open."
        )

    def _app(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path == "/healthz":
            return _answer(start_response, *self.metrics.health())
        if path == "/readyz":
            return _answer(start_response, *self.metrics.readiness())
        if path in ("/metrics", "/"):
            result: Iterable[bytes] = self._scrape(environ, start_response)
            return result
        start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
        return [b"not found: try /metrics, /healthz or /readyz\n"]


def _answer(start_response: StartResponse, ok: bool, text: str) -> list[bytes]:
    status = "200 OK" if ok else "503 Service Unavailable"
    start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
    return [text.encode() + b"\n"]
