"""``splitstate state dump|offsets``: read a processor's state without stopping it, or one
of its snapshots (``--snapshot MODULE:APP --processor J [--snapshot-id ID]``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from statestore.dump import dump_records, offset_records
from statestore.errors import StateStoreError

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
    """A parent parser of ``--dir DIR | --snapshot MODULE:APP``, ``[--processor J]``: whose
    state to read."""
    parser = argparse.ArgumentParser(add_help=False)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--dir",
        type=Path,
        help="the app's state directory (holding processor-<J>), or one processor's",
    )
    source.add_argument(
        "--snapshot",
        metavar="MODULE:APP",
        help="read a snapshot of the app's processor J (--processor) from its snapshot store",
    )
    parser.add_argument("--config", type=Path, help="the app's config file (with --snapshot)")
    parser.add_argument("--snapshot-id", help="which snapshot (default: the newest)")
    parser.add_argument("--processor", type=int, help="only processor J")
    return parser


@contextmanager
def _directory(args: argparse.Namespace) -> Iterator[Path]:
    """The state directory to read: ``--dir``, or a downloaded snapshot."""
    if args.dir is not None:
        yield args.dir
        return
    if args.processor is None:
        raise StateStoreError("--snapshot needs --processor J: whose snapshot to read")
    from framework.loader import load_app  # noqa: PLC0415 - the app only for snapshots
    from framework.ops.cli.snapshot import downloaded_snapshot  # noqa: PLC0415

    app = load_app(args.snapshot, args.config)
    with downloaded_snapshot(app, args.processor, args.snapshot_id) as path:
        yield path


def _print_lines(records: Iterable[dict[str, Any]]) -> int:
    out = sys.stdout.buffer
    for record in records:
        out.write(orjson.dumps(record) + b"\n")
    out.flush()
    return 0


def _dump(args: argparse.Namespace) -> int:
    with _directory(args) as directory:
        return _print_lines(dump_records(directory, args.store, args.processor))


def _offsets(args: argparse.Namespace) -> int:
    with _directory(args) as directory:
        return _print_lines(offset_records(directory, args.processor))
