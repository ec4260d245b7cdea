"""``splitstate snapshot take|list``: take processors' snapshots now, and show the store."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from framework.app import App
from framework.config import ConfigError
from framework.coordination.control_log import ControlLog
from framework.coordination.scaling import read_control
from framework.kafka import Clients
from framework.loader import load_app
from framework.ops.cli._arguments import app_arguments
from framework.ops.escape import printable
from framework.redaction import mask_url
from framework.snapshots.transfer_progress import copied_text
from rebalance.control_records import SnapshotRequest
from statestore import StateStoreError
from statestore.snapshot_copy import SnapshotDownload
from statestore.snapshot_manifest import SnapshotManifest
from statestore.snapshot_store import SnapshotStore

__all__ = ["downloaded_snapshot", "register", "take_snapshots"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``snapshot`` subcommand."""
    snapshot = commands.add_parser("snapshot", help="processors' durable state snapshots")
    actions = snapshot.add_subparsers(dest="action", required=True, metavar="ACTION")
    take = actions.add_parser(
        "take", parents=[app_arguments()], help="take a snapshot now and wait for it"
    )
    take.add_argument("--processor", type=int, metavar="J", help="only processor J")
    take.add_argument("--timeout", type=float, default=300.0, help="seconds to wait (300)")
    take.set_defaults(handler=_take)
    listing = actions.add_parser(
        "list", parents=[app_arguments()], help="each processor's snapshots in the store"
    )
    listing.add_argument("--processor", type=int, metavar="J", help="only processor J")
    listing.set_defaults(handler=_list)


def describe(manifest: SnapshotManifest, now: float) -> str:
    """One line about ``manifest``: id, age, size, generation and offsets (escaped, as read
    from the store: ``printable``)."""
    offsets = ", ".join(f"{t}[{p}]@{o}" for (t, p), o in sorted(manifest.offsets.items()))
    return printable(
        f"processor {manifest.processor}  {manifest.id}  {max(0.0, now - manifest.created):7.0f}s "
        f"old  {manifest.size:>12,} bytes  generation {manifest.generation}  {offsets or '-'}"
    )


def take_snapshots(
    app: App,
    processor: int | None,
    timeout: float,
    on_wait: Callable[[int, int, float], None] | None = None,
) -> dict[int, SnapshotManifest]:
    """Ask the app's processors (or ``processor``) for a snapshot through the control log
    and wait until each has one answering the request; returns them. ``on_wait(answered,
    asked, seconds_left)`` hears how the wait goes, about twice a second."""
    config = app.config
    if not config.snapshots.enabled:
        raise ConfigError("snapshots.enabled is false in the config. Fix: enable snapshots.")
    kafka = Clients.of(config)
    try:
        state = read_control(app, kafka)
        if state.processors is None:
            raise ConfigError(
                f"app {config.app_id!r} has not started yet (its control log is empty). "
                "Fix: start its processors first (`splitstate run MODULE:APP --all`)."
            )
        count = max(state.processors, state.scaling.new_processors if state.scaling else 0)
        wanted = list(range(count)) if processor is None else [processor]
        request = SnapshotRequest(uuid.uuid4().hex, processor)
        ControlLog(kafka, config.control_topic).append(request.to_record())
    finally:
        kafka.close()
    store = SnapshotStore(config.snapshot_url, config.app_id)
    deadline = time.monotonic() + timeout
    found: dict[int, SnapshotManifest] = {}
    while True:
        for j in wanted:
            if j not in found:
                answer = [m for m in store.manifests(j) if m.request == request.id]
                if answer:
                    found[j] = answer[-1]
        if on_wait is not None:
            on_wait(len(found), len(wanted), max(0.0, deadline - time.monotonic()))
        if len(found) == len(wanted):
            return found
        if time.monotonic() > deadline:
            missing = sorted(set(wanted) - set(found))
            raise StateStoreError(
                f"processors {missing} took no snapshot within {timeout:.0f}s. Fix: check that "
                "they run (`splitstate status`) and can write to snapshots.url; their logs "
                "say why an upload failed."
            )
        time.sleep(0.5)


def _take(args: argparse.Namespace) -> int:
    app = load_app(args.app, args.config)
    # rich only here: `splitstate run` must not pay for importing it
    from framework.ops.bars import ProgressView  # noqa: PLC0415
    from framework.ops.terminal import terminal  # noqa: PLC0415

    with ProgressView(terminal(sys.stderr)) as view:
        task = view.add("snapshot take")

        def waiting(answered: int, asked: int, left: float) -> None:
            task.update(
                answered, asked, f"{answered} of {asked} processors answered, {left:.0f}s left"
            )

        taken = take_snapshots(app, args.processor, args.timeout, waiting)
    now = time.time()
    for j in sorted(taken):
        print(describe(taken[j], now))
    return 0


def _list(args: argparse.Namespace) -> int:
    app = load_app(args.app, args.config)
    config = app.config
    store = SnapshotStore(config.snapshot_url, config.app_id)
    processors = store.processors() if args.processor is None else [args.processor]
    now = time.time()
    print(f"snapshot store {mask_url(store.url)}")
    shown = 0
    for j in processors:
        for manifest in store.manifests(j):
            print(describe(manifest, now))
            shown += 1
    if not shown:
        print("no snapshots")
    return 0


@contextmanager
def downloaded_snapshot(
    app: App, processor: int, snapshot_id: str | None
) -> Iterator[tuple[Path, SnapshotManifest]]:
    """A temporary local copy of processor ``processor``'s snapshot ``snapshot_id`` (default:
    its newest), deleted afterwards, and its manifest; the download shows a bar (plain lines
    when stderr is not a terminal)."""
    config = app.config
    store = SnapshotStore(config.snapshot_url, config.app_id)
    manifests = store.manifests(processor)
    chosen = [m for m in manifests if snapshot_id is None or m.id == snapshot_id]
    if not chosen:
        raise StateStoreError(
            f"processor {processor} has no snapshot{f' {snapshot_id}' if snapshot_id else ''} "
            f"in {mask_url(store.url)}. Fix: see `splitstate snapshot list`."
        )
    # rich only here: `splitstate run` must not pay for importing it
    from framework.ops.bars import ProgressView  # noqa: PLC0415
    from framework.ops.terminal import terminal  # noqa: PLC0415

    scratch = Path(tempfile.mkdtemp(prefix="splitstate-snapshot-"))
    try:
        download = SnapshotDownload(store, chosen[-1], scratch / f"processor-{processor}")
        try:
            with ProgressView(terminal(sys.stderr)) as view:
                task = view.add(f"snapshot download {chosen[-1].id}")
                finished = False
                while not finished:
                    finished = download.step(16 << 20)
                    task.update(
                        download.copied,
                        download.total,
                        copied_text(download.copied, download.total),
                    )
        finally:
            download.close()
        yield scratch / f"processor-{processor}", chosen[-1]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
