"""The ``splitstate`` command line."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from argparse import SUPPRESS
from collections.abc import Sequence
from importlib import metadata
from typing import Any

from framework.errors import SplitstateError
from framework.ops.cli import backfill as backfill_commands
from framework.ops.cli import broker as broker_commands
from framework.ops.cli import control as control_commands
from framework.ops.cli import expand as expand_commands
from framework.ops.cli import new as new_commands
from framework.ops.cli import order as order_commands
from framework.ops.cli import run as run_commands
from framework.ops.cli import snapshot as snapshot_commands
from framework.ops.cli import state as state_commands
from framework.ops.cli import tail as tail_commands
from framework.ops.cli._errors import report_error
from framework.ops.logs import LOG_FORMAT_VARIABLE, LOG_FORMATS
from framework.redaction import RedactingFormatter
from statestore.errors import StateStoreError

__all__ = ["build_parser", "installed_version", "main"]

EXIT_USER_ERROR = 2
EXIT_UNEXPECTED = 1
_LOG_FORMAT: dict[str, Any] = {
    "choices": LOG_FORMATS,
    "help": f"how `run` logs: text, or json (one object per line); default: "
    f"${LOG_FORMAT_VARIABLE}, else text",
}


def installed_version() -> str:
    """The installed distribution's version (``pyproject.toml``'s), or ``unknown`` when the
    packages run from a directory no installer recorded."""
    try:
        return metadata.version("splitstate")
    except metadata.PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="splitstate",
        description="Stateful stream processing on Kafka that scales without moving state.",
    )
    parser.add_argument(
        "--debug", action="store_true", help="show full tracebacks instead of short messages"
    )
    parser.add_argument("--log-format", **_LOG_FORMAT)
    parser.add_argument("--version", action="version", version=f"splitstate {installed_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    broker_commands.register(commands)
    run_commands.register(commands)
    # also after `run`; left unset there, so that one given before the command stays
    commands.choices["run"].add_argument("--log-format", **_LOG_FORMAT, default=SUPPRESS)
    state_commands.register(commands)
    backfill_commands.register(commands)
    expand_commands.register(commands)
    snapshot_commands.register(commands)
    control_commands.register(commands)
    order_commands.register(commands)
    tail_commands.register(commands)
    new_commands.register(commands)
    return parser


def main(argv: Sequence[str] | None = None, *, script: str | None = None) -> int:
    """Run one ``splitstate`` command; returns the process exit status. ``script`` (e.g.
    ``python app.py``): ``argv`` is ``run APP ...`` for an app that runs itself
    (``App.run``), whose usage and errors name the script and not the ``APP`` it fills in."""
    parser = build_parser()
    if script is None:
        args = parser.parse_args(argv)
    else:
        run = _run_as_script(parser, script)
        args, unknown = parser.parse_known_args(argv)
        if unknown:  # (the top parser would report them under `splitstate`'s usage)
            run.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command != "run":  # `run` sets up its logging itself (--log-format)
        _warnings_to_stderr()
    debug = bool(args.debug or os.environ.get("SPLITSTATE_DEBUG"))
    try:
        status: int = args.handler(args)
    except (SplitstateError, StateStoreError) as error:
        report_error(args, error, with_traceback=debug)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # a bug, or an error of a library no layer explained
        report_error(args, error, with_traceback=True)
        return EXIT_UNEXPECTED
    return status


def _run_as_script(parser: argparse.ArgumentParser, script: str) -> argparse.ArgumentParser:
    """Make ``run``'s usage, help and errors say ``script`` and leave out its ``APP``; the
    ``run`` parser."""
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    run: argparse.ArgumentParser = commands.choices["run"]
    run.prog = script
    for action in run._actions:
        if action.dest == "app":
            action.help = SUPPRESS
    return run


def _warnings_to_stderr() -> None:
    """Log warnings and errors to stderr as bare messages (as Python does when logging is
    not set up), secrets masked."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)  # as logging.lastResort: a logger set lower stays quiet
    handler.setFormatter(RedactingFormatter("%(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
