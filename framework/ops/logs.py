"""How ``splitstate run`` logs: readable text (the default), or one JSON object per line.

``--log-format json`` (or ``SPLITSTATE_LOG_FORMAT=json``) writes each record to stderr as
``{"time", "level", "logger", "message", "app", "processor", "generation"}`` (plus
``"exception"``, the formatted traceback, when there is one), for a log collector to index.
``app`` and ``processor`` are set as the command starts (``processor`` is ``null`` in the
supervisor of ``run --all``); ``generation`` is the generation in force, kept current by the
runtime (``framework.runtime.log_context``), so it changes during a scale. Text lines stay
``time LEVEL logger: message``. In both, the secrets of the app's config are masked
(``framework.redaction.scrub``), in the message and in a traceback.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import orjson

from framework.config import ConfigError
from framework.redaction import RedactingFormatter, scrub
from framework.runtime.log_context import LOG_CONTEXT

__all__ = [
    "DEFAULT_LOG_FORMAT",
    "LOG_FORMATS",
    "LOG_FORMAT_VARIABLE",
    "ContextFilter",
    "JsonFormatter",
    "default_log_format",
    "setup_logging",
]

#: the formats ``--log-format`` takes
LOG_FORMATS = ("text", "json")
DEFAULT_LOG_FORMAT = "text"
#: the environment variable that sets the format when ``--log-format`` is not given
LOG_FORMAT_VARIABLE = "SPLITSTATE_LOG_FORMAT"
_TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def default_log_format(environ: Mapping[str, str] = os.environ) -> str:
    """``SPLITSTATE_LOG_FORMAT`` when set (checked), else ``text``."""
    return check_log_format(environ.get(LOG_FORMAT_VARIABLE, DEFAULT_LOG_FORMAT), environ)


def check_log_format(value: str, environ: Mapping[str, str] = os.environ) -> str:
    """``value`` when it is a log format; ``ConfigError`` naming the fix otherwise."""
    if value in LOG_FORMATS:
        return value
    where = (
        f"{LOG_FORMAT_VARIABLE}={value}"
        if environ.get(LOG_FORMAT_VARIABLE) == value
        else f"--log-format {value}"
    )
    raise ConfigError(
        f"{where} is not a log format. Fix: use one of {', '.join(LOG_FORMATS)} "
        f"(json: one JSON object per line)."
    )


class ContextFilter(logging.Filter):
    """Puts ``app``, ``processor`` and ``generation`` (``LOG_CONTEXT``, as of now) on each
    record it sees; lets every record through."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Annotate ``record``; always ``True``."""
        record.app = LOG_CONTEXT.app
        record.processor = LOG_CONTEXT.processor
        record.generation = LOG_CONTEXT.generation
        return True


class JsonFormatter(logging.Formatter):
    """A record as one line of JSON: time (UTC, ISO 8601, milliseconds), level, logger,
    message, app, processor, generation, and ``exception`` / ``stack`` as text when present.

    It never raises, so a record is never lost to a "--- Logging error ---" on stderr: a
    message whose arguments do not fit its format is ``'format' (arguments,)``, text that is
    not valid UTF-8 (lone surrogates) has them as ``\\udcXX``, and a value orjson refuses
    (an int above 64 bits) goes through ``json``. The app's secrets are masked in the
    message, the traceback and the stack (``framework.redaction.scrub``)."""

    def format(self, record: logging.LogRecord) -> str:
        """The JSON line of ``record`` (without the newline)."""
        try:
            line = self._fields(record)
        except Exception as error:  # a log line must not end anything
            line = _unformattable(record, error)
        try:
            return orjson.dumps(line, default=str).decode()
        except TypeError:  # orjson.JSONEncodeError: lone surrogates, an int above 64 bits
            return json.dumps({key: _plain(value) for key, value in line.items()})

    def _fields(self, record: logging.LogRecord) -> dict[str, Any]:
        """The fields of ``record``'s line (may raise: ``format`` falls back)."""
        line: dict[str, Any] = {
            "time": _time(record),
            "level": record.levelname,
            "logger": record.name,
            "message": scrub(_message(record)),
            "app": getattr(record, "app", LOG_CONTEXT.app),
            "processor": getattr(record, "processor", LOG_CONTEXT.processor),
            "generation": getattr(record, "generation", LOG_CONTEXT.generation),
        }
        if record.exc_info:
            line["exception"] = scrub(self.formatException(record.exc_info))
        elif record.exc_text:
            line["exception"] = scrub(record.exc_text)
        if record.stack_info:
            line["stack"] = scrub(self.formatStack(record.stack_info))
        return line


def _time(record: logging.LogRecord) -> str:
    """When ``record`` was made: UTC, ISO 8601, to the millisecond."""
    moment = datetime.fromtimestamp(record.created, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _message(record: logging.LogRecord) -> str:
    """``record``'s message; its format and arguments as they are when they do not fit."""
    try:
        return record.getMessage()
    except Exception:  # e.g. log.info("%d", "x")
        return f"{record.msg!r} {record.args!r}"


def _unformattable(record: logging.LogRecord, error: Exception) -> dict[str, Any]:
    """The fields of a record that could not be read, from what is sure to be there."""
    return {
        "time": _time(record),
        "level": str(record.levelname),
        "logger": str(record.name),
        "message": f"unformattable log record: {type(error).__name__}",
        "app": LOG_CONTEXT.app,
        "processor": LOG_CONTEXT.processor,
        "generation": LOG_CONTEXT.generation,
    }


def _plain(value: object) -> object:
    """``value`` as ``json`` writes it to valid UTF-8: text (or ``str`` of an object) with
    lone surrogates as ``\\udcXX``; ``None``, bools, ints and finite floats as they are (other
    floats ``None``, as orjson writes them)."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    try:
        text = value if isinstance(value, str) else str(value)
    except Exception as error:  # an object whose str() fails
        text = f"<{type(value).__name__}: str() raised {type(error).__name__}>"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def setup_logging(
    log_format: str,
    *,
    app: str | None = None,
    processor: int | None = None,
    level: int = logging.INFO,
) -> logging.Handler:
    """Log to stderr in ``log_format`` (``text`` or ``json``) at ``level``, every line about
    ``app`` and ``processor``; returns the handler. As ``logging.basicConfig``: nothing is
    changed when the root logger already has handlers (e.g. a test's), but the context."""
    LOG_CONTEXT.app, LOG_CONTEXT.processor = app, processor
    handler = logging.StreamHandler(sys.stderr)
    json_lines = check_log_format(log_format) == "json"
    handler.setFormatter(JsonFormatter() if json_lines else RedactingFormatter(_TEXT))
    handler.addFilter(ContextFilter())
    logging.basicConfig(level=level, handlers=[handler])
    return handler
