"""``splitstate state dump|offsets``: read a processor's state without stopping it, or one
of its snapshots (``--snapshot MODULE:APP --processor J [--snapshot-id ID]``).

A processor's state keeps the offsets of partitions it gave away in a scale (the control log,
not the state, says who owns what). With the app (``--app MODULE:APP``, or ``--snapshot``:
the partitions the snapshot covers), each offset line says whether the processor owns that
partition (``"owned"``); without it, a note on stderr says what the list holds."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from framework.time.key_clock import TIME_STORE, KeyClock
from statestore.dump import dump_records, offset_records
from statestore.errors import StateStoreError

if TYPE_CHECKING:
    from framework.app import App

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
    parser.add_argument(
        "--app",
        metavar="MODULE:APP",
        help="with --dir: the app, whose control log says which partitions each processor owns",
    )
    parser.add_argument(
        "--config", type=Path, help="the app's config file (with --snapshot or --app)"
    )
    parser.add_argument("--snapshot-id", help="which snapshot (default: the newest)")
    parser.add_argument("--processor", type=int, help="only processor J")
    return parser


#: which input partitions processor J owns (``None``: not known)
Owned = Callable[[int], set[tuple[str, int]]] | None


@contextmanager
def _directory(args: argparse.Namespace) -> Iterator[tuple[Path, Owned]]:
    """The state directory to read (``--dir``, or a downloaded snapshot), and who owns what:
    per the control log (``--dir`` with ``--app``) or the snapshot (the partitions it
    covers)."""
    from framework.loader import load_app  # noqa: PLC0415 - the app only when named

    if args.dir is not None:
        yield args.dir, None if args.app is None else _owned_now(load_app(args.app, args.config))
        return
    if args.processor is None:
        raise StateStoreError("--snapshot needs --processor J: whose snapshot to read")
    from framework.ops.cli.snapshot import downloaded_snapshot  # noqa: PLC0415

    app = load_app(args.snapshot, args.config)
    with downloaded_snapshot(app, args.processor, args.snapshot_id) as (path, manifest):
        yield path, lambda _processor: set(manifest.offsets)


def _owned_now(app: App) -> Owned:
    """Who owns what now, from the app's control log and topic registry."""
    from framework.coordination.control_log import ControlLog  # noqa: PLC0415
    from framework.coordination.registry import TopicRegistry  # noqa: PLC0415
    from framework.kafka import Clients  # noqa: PLC0415

    config = app.config
    clients = Clients.of(config)
    try:
        control = ControlLog(clients, config.control_topic).read()
        entries = TopicRegistry(clients).read()
    finally:
        clients.close()
    counts = {
        t.topic: entries[t.topic].history.created for t in config.inputs if t.topic in entries
    }
    return lambda processor: control.owned(processor, counts)


def _print_lines(records: Iterable[dict[str, Any]]) -> int:
    out = sys.stdout.buffer
    for record in records:
        out.write(orjson.dumps(record) + b"\n")
    out.flush()
    return 0


def _dump(args: argparse.Namespace) -> int:
    with _directory(args) as (directory, _owned):
        readers = {TIME_STORE: KeyClock.readable}  # (due times: the dump knows them)
        return _print_lines(dump_records(directory, args.store, args.processor, readers))


def _offsets(args: argparse.Namespace) -> int:
    with _directory(args) as (directory, owned):
        records = list(offset_records(directory, args.processor))
        if owned is None:
            print(
                "note: a processor's state keeps the offsets of partitions it gave away in a "
                "scale; add --app MODULE:APP to mark which partitions each one owns now",
                file=sys.stderr,
            )
            return _print_lines(records)
        mine = {j: owned(j) for j in {int(r["processor"]) for r in records}}
        return _print_lines(
            {**r, "owned": (r["topic"], r["partition"]) in mine[int(r["processor"])]}
            for r in records
        )
