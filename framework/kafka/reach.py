"""Before a process's first Kafka client: does any broker answer at ``bootstrap.servers``?

Without this check a wrong ``bootstrap.servers`` shows as the first request's timeout (30 s)
and librdkafka's raw error (``KafkaError{code=_ALL_BROKERS_DOWN,...}``). ``check_reachable``
asks for the cluster's metadata with a client of its own, whose librdkafka lines it keeps
(each server's last failure) and whose reconnect back-off it caps at a second, so a broker
that starts listening meanwhile is found within about a second.

How long it tries depends on what the servers answer. Connections refused and names that do
not resolve are definite: when every server answered that way for ``refused_seconds``
(10 s), it stops. A broker merely slow to start refuses only until it listens, which a local
or restarted broker does within seconds; a process that stops here is restarted by its
supervisor (``run --all``, Kubernetes). A server that accepted a connection but has not
answered as a broker yet, or no answer at all (a connection attempt still pending, e.g. a
firewall dropping packets), may be a slow broker or network: it is given ``answer_seconds``
(30 s, the port's request timeout) before the check stops.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from framework.kafka.errors import KafkaUnreachableError

__all__ = ["ANSWER_SECONDS", "REFUSED_SECONDS", "check_reachable"]

#: how long every server may refuse connections (or fail to resolve) before the check stops
REFUSED_SECONDS = 10.0
#: how long the check waits for an answer otherwise
ANSWER_SECONDS = 30.0
#: librdkafka's FAIL line: ``[thrd:...]: BROKER/ID: REASON (after Nms in state STATE)``
_FAIL = re.compile(
    r"^(?:\[thrd:[^\]]*\]: )?(?P<broker>[^ ]+?)(?:/\w+)?: (?P<reason>.*?)"
    r"(?: \(after \d+ms in state (?P<state>[A-Z_]+)[^)]*\))?$"
)
_DEFINITE = re.compile(r"Connection refused|Failed to resolve", re.IGNORECASE)
_VARIABLE = "SPLITSTATE_KAFKA__BOOTSTRAP_SERVERS"


class _Failures:
    """The ``logger`` of the check's client: each server's last failure, and whether any
    server got past the TCP connection (answered something, if not as a broker)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.last: dict[str, str] = {}
        self.past_connect = False
        self.indefinite = False

    def log(self, _level: int, message: str, *args: Any) -> None:
        """Note a librdkafka FAIL line (confluent-kafka calls it with ``FACILITY``, the client
        name and the text)."""
        if len(args) < 3 or args[0] != "FAIL" or not isinstance(args[-1], str):
            return
        found = _FAIL.match(args[-1])
        if found is None:
            return
        with self._lock:
            self.last[found["broker"]] = found["reason"]
            if found["state"] not in (None, "CONNECT", "TRY_CONNECT"):
                self.past_connect = True
            elif not _DEFINITE.search(found["reason"]):
                self.indefinite = True  # e.g. a connection set-up that timed out

    def said(self) -> dict[str, str]:
        """Each server's last failure."""
        with self._lock:
            return dict(self.last)


def check_reachable(
    settings: Mapping[str, Any],
    *,
    refused_seconds: float = REFUSED_SECONDS,
    answer_seconds: float = ANSWER_SECONDS,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Return once a broker at ``settings["bootstrap.servers"]`` answered a metadata request;
    raise ``KafkaUnreachableError`` naming the servers, what each answered, how long it tried
    and the fix, after ``refused_seconds`` of refusals only, or ``answer_seconds`` in all."""
    failures = _Failures()
    backoff = int(settings.get("reconnect.backoff.ms", 100))  # the cap may not be below it
    cap = max(backoff, min(int(settings.get("reconnect.backoff.max.ms", 1000)), 1000))
    wanted = {**settings, "logger": failures, "reconnect.backoff.max.ms": cap}
    try:
        client = AdminClient(wanted)
    except KafkaException as error:
        raise KafkaUnreachableError(f"could not make a Kafka client: {error}") from None
    servers = str(settings.get("bootstrap.servers", "")).strip()
    started = clock()
    while True:
        elapsed = clock() - started
        limit = answer_seconds
        if not (failures.past_connect or failures.indefinite) and len(failures.last) >= len(
            [s for s in servers.split(",") if s.strip()]
        ):
            limit = refused_seconds  # every server refused or did not resolve
        if elapsed >= limit:
            raise KafkaUnreachableError(_message(servers, failures, elapsed))
        try:
            client.list_topics(timeout=max(0.1, min(1.0, limit - elapsed)))
            return
        except KafkaException:
            pass
        finally:
            client.poll(0)  # serves the FAIL lines to ``failures``


def _message(servers: str, failures: _Failures, elapsed: float) -> str:
    said = failures.said()
    if said:
        answers = "; ".join(f"{broker}: {reason}" for broker, reason in sorted(said.items()))
    else:
        answers = "no answer (no connection was made or refused)"
    source = (
        f" ({_VARIABLE} is set to {servers!r} and overrides the config file)"
        if os.environ.get(_VARIABLE, "").strip() == servers and servers
        else ""
    )
    where = repr(servers) if servers else "(bootstrap.servers is not set)"
    return (
        f"no Kafka broker answered at {where} in {elapsed:.0f}s of trying: {answers}. "
        f"Fix: check kafka.bootstrap_servers{source}, and that the broker runs and listens "
        "there (`splitstate broker status`; `splitstate broker start` runs one here)."
    )
