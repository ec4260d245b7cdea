"""``splitstate state dump|offsets``: read a processor's state without stopping it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from statestore.dump import dump_records, offset_records

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``state`` subcommand."""
    state = commands.add_parser("state", help="inspect processors' local state")
    actions = state.add_subparsers(dest="action", required=True, metavar="ACTION")
    where = _where()

    dump = actions.add_parser(
        "dump", parents=[where], help='print every value as JSON lines {"store", "key", "value"}'
    )
    dump.add_argument("--store", help="only this store")
    dump.set_defaults(handler=_dump)

    offsets = actions.add_parser(
        "offsets", parents=[where], help="print the committed input offsets"
    )
    offsets.set_defaults(handler=_offsets)


def _where() -> argparse.ArgumentParser:
    """A parent parser of ``--dir DIR [--processor J]``: whose state to read."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument(
        "--dir",
        type=Path,
        required=True,
        help="the app's state directory (holding processor-<J>), or one processor's",
    )
    parser.add_argument("--processor", type=int, help="only processor J")
    return parser


def _print_lines(records: Iterable[dict[str, Any]]) -> int:
    out = sys.stdout.buffer
    for record in records:
        out.write(orjson.dumps(record) + b"\n")
    out.flush()
    return 0


def _dump(args: argparse.Namespace) -> int:
    return _print_lines(dump_records(args.dir, args.store, args.processor))


def _offsets(args: argparse.Namespace) -> int:
    return _print_lines(offset_records(args.dir, args.processor))
