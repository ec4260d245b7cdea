"""How ``splitstate run`` logs: readable text (the default), or one JSON object per line.

``--log-format json`` (or ``SPLITSTATE_LOG_FORMAT=json``) writes each record to stderr as
``{"time", "level", "logger", "message", "app", "processor", "generation"}`` (plus
``"exception"``, the formatted traceback, when there is one), for a log collector to index.
``app`` and ``processor`` are set as the command starts (``processor`` is ``null`` in the
supervisor of ``run --all``); ``generation`` is the generation in force, kept current by the
runtime (``framework.runtime.log_context``), so it changes during a scale. Text lines stay
``time LEVEL logger: message``.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import orjson

from framework.config import ConfigError
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
    message, app, processor, generation, and ``exception`` / ``stack`` as text when present."""

    def format(self, record: logging.LogRecord) -> str:
        """The JSON line of ``record`` (without the newline)."""
        moment = datetime.fromtimestamp(record.created, UTC)
        line: dict[str, Any] = {
            "time": moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "app": getattr(record, "app", LOG_CONTEXT.app),
            "processor": getattr(record, "processor", LOG_CONTEXT.processor),
            "generation": getattr(record, "generation", LOG_CONTEXT.generation),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return orjson.dumps(line, default=str).decode()


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
    handler.setFormatter(JsonFormatter() if json_lines else logging.Formatter(_TEXT))
    handler.addFilter(ContextFilter())
    logging.basicConfig(level=level, handlers=[handler])
    return handler
