"""How a ``splitstate`` command reports the error that ends it, on stderr: the line
``splitstate: error: ...`` (the traceback instead when the error is unexpected, or with
``--debug``), or, for ``run`` logging JSON, one JSON log line at level ``CRITICAL`` (its
traceback under ``"exception"``). Either way the app's secrets are masked, and control
characters (an error may quote the control log, a progress report or a path) escaped."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback

from framework.ops.escape import printable
from framework.ops.logs import LOG_FORMAT_VARIABLE, ContextFilter, JsonFormatter
from framework.redaction import scrub

__all__ = ["report_error"]

log = logging.getLogger("splitstate")


def _json_lines(args: argparse.Namespace) -> bool:
    """Whether the command is ``run`` and logs JSON (``--log-format``, else the variable)."""
    chosen = getattr(args, "log_format", None) or os.environ.get(LOG_FORMAT_VARIABLE)
    return bool(args.command == "run" and chosen == "json")


def report_error(args: argparse.Namespace, error: BaseException, *, with_traceback: bool) -> None:
    """Write ``error`` to stderr as the command's last words."""
    if _json_lines(args):
        exc_info = (type(error), error, error.__traceback__) if with_traceback else None
        record = log.makeRecord(log.name, logging.CRITICAL, "", 0, "%s", (error,), exc_info)
        ContextFilter().filter(record)
        print(JsonFormatter().format(record), file=sys.stderr, flush=True)
        return
    if with_traceback:
        text = "".join(traceback.format_exception(error)).rstrip("\n")
    else:
        text = f"splitstate: error: {error}"
    # escaped (lines kept): an error may quote the control log, a report or a path
    shown = "\n".join(printable(line) for line in scrub(text).split("\n"))
    print(shown, file=sys.stderr, flush=True)
