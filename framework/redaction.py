"""Secrets kept out of everything splitstate prints or logs: the one place that knows them.

Three things: which settings are secret (``is_secret_key``: by name, erring on masking), how a
URL's credentials are masked (``mask_url``: its user info, whatever characters the secret
holds, and every query value but a few known harmless ones), and how the secret values of
the configs this process loaded are masked in any text (``scrub``: for the errors of
pyarrow, librdkafka and others that repeat a value they were given). ``AppConfig`` hands
its secrets to ``remember_secrets`` as it is validated; the CLI's error lines and every log
line (``RedactingFormatter``, ``framework.ops.logs``) pass through ``scrub``.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import unquote

from pydantic import BaseModel

__all__ = [
    "MASK",
    "MIN_SCRUBBED",
    "SECRET_KEY",
    "RedactedRepr",
    "RedactingFormatter",
    "is_secret_key",
    "mask_secrets",
    "mask_url",
    "redacted_data",
    "remember_secrets",
    "scrub",
    "secret_values",
    "url_secrets",
]

MASK = "*****"
#: setting names whose values are secret (librdkafka's, Spark's and Hadoop's, e.g.
#: ``sasl.password``, ``sasl.oauthbearer.config``, ``ssl.key.password``,
#: ``spark.hadoop.fs.s3a.secret.key``, ``spark.hadoop.fs.azure.account.key.<account>``,
#: ``spark.hadoop.fs.azure.sas.<container>.<account>``, ``basic.auth.user.info``)
SECRET_KEY = re.compile(
    r"passw|secret|token|credential|jaas|private|\.pem$|key|sasl\..*config"
    r"|(?:^|[._-])(?:sas|sig)(?:[._-]|$)|signature|user[._]?info",
    re.IGNORECASE,
)
#: URL query parameters whose values are shown (pyarrow.fs options that hold no secret)
_HARMLESS_QUERY = frozenset(
    {
        "allow_bucket_creation",
        "allow_bucket_deletion",
        "endpoint_override",
        "region",
        "replication",
        "retry_limit_seconds",
        "scheme",
    }
)
#: shorter secret values are not scrubbed from free text (they would mangle it)
MIN_SCRUBBED = 4


def is_secret_key(name: str) -> bool:
    """Whether a setting called ``name`` holds a secret."""
    return SECRET_KEY.search(name) is not None


def mask_secrets(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``settings`` with secret values (by name) replaced by ``*****``."""
    return {key: MASK if is_secret_key(key) else value for key, value in settings.items()}


def _split_url(url: str) -> tuple[str, str | None, str, str | None] | None:
    """``url`` as (scheme, user info, host and path, query), ``None`` when it is no URL.
    The user info runs to the *last* ``@``: a secret may hold ``/``, ``:``, ``@``, ``?``."""
    scheme, separator, rest = url.partition("://")
    if not separator:
        return None
    userinfo, at, location = rest.rpartition("@")
    location, question, query = location.partition("?")
    return scheme, userinfo if at else None, location, query if question else None


def _query_values(query: str) -> Iterator[tuple[str, str, bool]]:
    """Each ``name=value`` of ``query``: name, value, and whether the value may be shown."""
    for part in query.split("&"):
        name, _, value = part.partition("=")
        yield name, value, name.lower() in _HARMLESS_QUERY


def mask_url(url: str) -> str:
    """``url`` with its user info and every query value but harmless ones (``region``,
    ``endpoint_override``, ...) masked; text that is no URL (a local path) as it is."""
    parts = _split_url(url)
    if parts is None:
        return url
    scheme, userinfo, location, query = parts
    shown = f"{scheme}://{'' if userinfo is None else MASK + '@'}{location}"
    if query is None:
        return shown
    pairs = (f"{n}={v if harmless else MASK}" for n, v, harmless in _query_values(query))
    return f"{shown}?{'&'.join(pairs)}"


def url_secrets(url: str) -> set[str]:
    """The pieces of ``url`` that ``mask_url`` masks (as written and percent-decoded)."""
    parts = _split_url(url)
    if parts is None:
        return set()
    _scheme, userinfo, _location, query = parts
    found: set[str] = set()
    if userinfo:
        user, _, password = userinfo.partition(":")
        found |= {userinfo, user, password}
    for _name, value, harmless in _query_values(query or ""):
        if not harmless:
            found.add(value)
    return found | {unquote(piece) for piece in found}


def _redact(value: Any, data: Any, found: set[str]) -> Any:
    """``data`` (``value`` dumped to JSON types) with its secrets masked; adds them to
    ``found``. Field names are ours and never secret; the keys of a mapping (settings)
    are the user's and are matched against ``SECRET_KEY``; any text may be a URL."""
    if isinstance(value, BaseModel):
        return {name: _redact(getattr(value, name), item, found) for name, item in data.items()}
    if isinstance(value, Mapping):
        redacted = {}
        for key, item in data.items():
            if is_secret_key(str(key)):
                if not isinstance(item, bool) and item is not None:
                    found.add(str(item))
                redacted[key] = MASK
            else:
                redacted[key] = _redact(value.get(key), item, found)
        return redacted
    if isinstance(value, list | tuple):
        return [_redact(v, d, found) for v, d in zip(value, data, strict=True)]
    if isinstance(data, str) and (masked := mask_url(data)) != data:
        found |= url_secrets(data)
        return masked
    return data


def redacted_data(model: BaseModel) -> dict[str, Any]:
    """``model`` as plain (JSON) data with every secret masked: safe to print or log."""
    redacted: dict[str, Any] = _redact(model, model.model_dump(mode="json"), set())
    return redacted


def secret_values(model: BaseModel) -> set[str]:
    """The secret values ``redacted_data`` masks in ``model``."""
    found: set[str] = set()
    _redact(model, model.model_dump(mode="json"), found)
    return found


class RedactedRepr:
    """A mixin of pydantic models: their ``repr`` and ``str`` show ``redacted_data``."""

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        """The fields as ``repr`` shows them, secrets masked."""
        assert isinstance(self, BaseModel)
        yield from redacted_data(self).items()


class _Known:
    """Secret values seen in this process, longest first (so a part never leaves the rest)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.values: tuple[str, ...] = ()

    def add(self, values: Iterable[str]) -> None:
        new = {v for v in values if len(v) >= MIN_SCRUBBED}
        with self._lock:
            if not new <= set(self.values):
                merged = new | set(self.values)
                self.values = tuple(sorted(merged, key=lambda v: (-len(v), v)))


_KNOWN = _Known()


def remember_secrets(values: Iterable[str]) -> None:
    """Have ``scrub`` mask ``values`` (those of ``MIN_SCRUBBED`` characters or more) from
    now on, in this process."""
    _KNOWN.add(values)


def scrub(text: str) -> str:
    """``text`` with every remembered secret value replaced by ``*****``."""
    for value in _KNOWN.values:
        if value in text:
            text = text.replace(value, MASK)
    return text


class RedactingFormatter(logging.Formatter):
    """A ``logging.Formatter`` whose lines (message, traceback) are ``scrub``bed."""

    def format(self, record: logging.LogRecord) -> str:
        """The line of ``record``, secrets masked."""
        return scrub(super().format(record))
