"""librdkafka's own log lines, through Python logging instead of straight to stderr.

Every client the Kafka port makes gets ``with_logger(settings)``: librdkafka then hands its
log lines to ``LibrdkafkaLog`` (served by the client's ``poll``/``consume``/``flush``),
which logs them to the ``splitstate.librdkafka`` logger as ``FACILITY [client] message``.

Levels follow syslog's (error, warning, notice/info, debug), except for a broker connection
being refused, closed or reset, and "all brokers are down". Those are DEBUG when they are
churn: the connection was working (librdkafka's "... in state UP") or was refused ("in state
CONNECT"); librdkafka reconnects on its own, and an outage that lasts surfaces as
splitstate's own error (a read that times out, a lease that runs out) naming the fix. A
disconnection while the connection is being set up (``APIVERSION_QUERY``, ``SSL_HANDSHAKE``,
``AUTH_*``: a plaintext client at a TLS listener, another protocol or authentication
mismatch), or one librdkafka explains (a wrong ``security.protocol``, TLS, authentication),
is at least a WARNING, but only the first per broker per minute: librdkafka retries it in a
loop, and the repeats are DEBUG. Every other line keeps its level.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["LIBRDKAFKA_LOGGER", "LibrdkafkaLog", "with_logger"]

#: the logger librdkafka's lines go to
LIBRDKAFKA_LOGGER = logging.getLogger("splitstate.librdkafka")

#: a connection coming and going, which librdkafka retries by itself
_TRANSIENT = re.compile(
    r"Connection refused|Disconnected|connection closed|Connection reset|brokers are down"
    r"|broker connections are down",
    re.IGNORECASE,
)
#: ... unless librdkafka says why (a wrong security.protocol, TLS, authentication)
_EXPLAINED = re.compile(r"might be caused|security\.protocol|SSL|SASL|authenticat", re.IGNORECASE)
#: the broker's state when it failed, as librdkafka ends its FAIL lines
_STATE = re.compile(r"\(after \d+ms in state ([A-Z_]+)")
#: states where a disconnection is churn: a working connection, or a refused one
_CHURN_STATES = frozenset({"UP", "UPDATE", "CONNECT", "TRY_CONNECT"})
#: the broker a FAIL line is about: its name, after the thread's ("[thrd:NAME]: NAME: ...")
_BROKER = re.compile(r"^(?:\[thrd:[^\]]*\]: )?(.*?): ")
#: seconds between two warnings about the same broker's failing connection set-up
WARN_EVERY = 60.0


class LibrdkafkaLog:
    """What confluent-kafka's ``logger`` setting takes: it calls ``log(level, "%s [%s] %s",
    facility, client name, message)`` with syslog's levels mapped to Python's."""

    def __init__(
        self,
        logger: logging.Logger = LIBRDKAFKA_LOGGER,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self._clock = clock
        self._lock = threading.Lock()  # clients are polled from several threads
        self._warned: dict[str, float] = {}  # broker -> when its last warning was logged

    def log(self, level: int, message: str, *args: Any) -> None:
        """Log one librdkafka line at its level (connection churn at DEBUG, a failing
        connection set-up at WARNING or above once per broker per minute)."""
        text = args[-1] if args else message
        if level > logging.DEBUG and isinstance(text, str) and _TRANSIENT.search(text):
            level = self._connection_level(level, text)
        self.logger.log(level, message, *args)

    def _connection_level(self, level: int, text: str) -> int:
        """The level of a line about a connection coming or going, at ``level`` as sent."""
        state = _STATE.search(text)
        explained = _EXPLAINED.search(text)
        if not explained and (state is None or state[1] in _CHURN_STATES):
            return logging.DEBUG
        named = _BROKER.match(text)
        broker = named[1] if named else ""
        now = self._clock()
        with self._lock:
            last = self._warned.get(broker)
            if last is not None and now - last < WARN_EVERY:
                return logging.DEBUG
            self._warned[broker] = now
        return max(level, logging.WARNING)


_LOG = LibrdkafkaLog()


def with_logger(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` with librdkafka's lines sent to Python logging (a ``logger`` given in
    ``settings`` is kept)."""
    return {"logger": _LOG, **settings}
