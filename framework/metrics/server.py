"""The processor's HTTP endpoint: ``/metrics`` (Prometheus text), ``/healthz``, ``/readyz``.

Served by prometheus_client's WSGI app (``make_wsgi_app`` over the processor's own registry)
plus the two health routes, on a threaded ``wsgiref`` server in a daemon thread, bound to
``metrics.host``. Health routes answer 200 or 503 with a one-line text body.
"""

from __future__ import annotations

import errno
import logging
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app

from framework.errors import SplitstateError
from framework.metrics.processor import ProcessorMetrics

__all__ = ["MetricsPortError", "MetricsServer"]

log = logging.getLogger(__name__)

StartResponse = Callable[..., Any]
Environ = dict[str, Any]


class MetricsPortError(SplitstateError):
    """The metrics endpoint cannot listen on its host and port."""


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    """A WSGI server answering each request in a thread of its own (daemon threads)."""

    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    """No access log line per scrape."""

    def log_message(self, format: str, *args: Any) -> None:
        return


class MetricsServer:
    """Serves ``metrics`` on ``host``:``port`` (``port`` 0: any free port) once ``start``ed."""

    def __init__(self, metrics: ProcessorMetrics, host: str, port: int) -> None:
        self.metrics = metrics
        self.host = host
        self.requested_port = port
        self._scrape = make_wsgi_app(metrics.registry)
        self._server: _ThreadingWSGIServer | None = None
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
            server = make_server(
                self.host,
                self.requested_port,
                self._app,
                server_class=_ThreadingWSGIServer,
                handler_class=_QuietHandler,
            )
        except OSError as error:
            raise self._port_error(error) from None
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
