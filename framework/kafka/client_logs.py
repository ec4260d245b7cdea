"""librdkafka's own log lines, through Python logging instead of straight to stderr.

Every client the Kafka port makes gets ``with_logger(settings)``: librdkafka then hands its
log lines to ``LibrdkafkaLog`` (served by the client's ``poll``/``consume``/``flush``),
which logs them to the ``splitstate.librdkafka`` logger as ``FACILITY [client] message``.

Levels follow syslog's (error, warning, notice/info, debug), except that a broker connection
being refused, closed or reset, and "all brokers are down", are DEBUG: librdkafka reconnects
on its own, and an outage that lasts surfaces as splitstate's own error (a read that times
out, a lease that runs out) naming the fix. A disconnection librdkafka explains (a wrong
``security.protocol``, TLS, authentication) and every other error keep their level.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
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


class LibrdkafkaLog:
    """What confluent-kafka's ``logger`` setting takes: it calls ``log(level, "%s [%s] %s",
    facility, client name, message)`` with syslog's levels mapped to Python's."""

    def __init__(self, logger: logging.Logger = LIBRDKAFKA_LOGGER) -> None:
        self.logger = logger

    def log(self, level: int, message: str, *args: Any) -> None:
        """Log one librdkafka line at its level (transient connection news at DEBUG)."""
        text = args[-1] if args else message
        if (
            level > logging.DEBUG
            and isinstance(text, str)
            and _TRANSIENT.search(text)
            and not _EXPLAINED.search(text)
        ):
            level = logging.DEBUG
        self.logger.log(level, message, *args)


_LOG = LibrdkafkaLog()


def with_logger(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` with librdkafka's lines sent to Python logging (a ``logger`` given in
    ``settings`` is kept)."""
    return {"logger": _LOG, **settings}
