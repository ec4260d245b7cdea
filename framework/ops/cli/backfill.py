"""``splitstate backfill``: build every processor's state from history with Spark."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from framework.loader import load_app
from framework.ops.cli._arguments import app_arguments

if TYPE_CHECKING:
    from framework.bootstrap import BootstrapProgress
    from framework.ops.bars import ProgressTask

__all__ = ["BackfillProgress", "register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``backfill`` subcommand."""
    parser = commands.add_parser(
        "backfill",
        parents=[app_arguments()],
        help="build every processor's state from the input history with Spark",
        description=(
            "Fold the input topics' history with the app's processor function (no outputs) "
            "and ingest each processor's state; processors then continue from the offsets "
            "it covers. For a first deployment on existing history, or after the processor "
            "logic changed."
        ),
    )
    parser.add_argument(
        "--source",
        nargs="+",
        default=["kafka"],
        metavar="SOURCE",
        help="`kafka` (default) or `parquet PATH` (an archive of the input topics)",
    )
    parser.add_argument(
        "--until",
        default="now",
        help="`now` (default: each partition's current end) or TOPIC:PARTITION=OFFSET,...",
    )
    parser.add_argument(
        "--processors", type=int, metavar="P", help="processor count (first deployment only)"
    )
    parser.add_argument(
        "--replace",
        action="store_true",
        help="move existing state aside (state_dir/replaced-<time>/) and build it anew",
    )
    parser.set_defaults(handler=_backfill)


def _backfill(args: argparse.Namespace) -> int:
    source = args.source
    if source == ["kafka"]:
        archive = None
    elif len(source) == 2 and source[0] == "parquet":
        archive = Path(source[1])
        if not archive.exists():
            print(f"splitstate: error: the archive {archive} does not exist", file=sys.stderr)
            return 2
    else:
        print(
            f"splitstate: error: --source {' '.join(source)} is not understood. Fix: "
            "--source kafka, or --source parquet PATH",
            file=sys.stderr,
        )
        return 2
    app = load_app(args.app, args.config)
    # the build (pyarrow) and rich only here: `splitstate run` must not pay for importing them
    from framework.bootstrap.backfill import backfill  # noqa: PLC0415
    from framework.ops.bars import ProgressView  # noqa: PLC0415
    from framework.ops.terminal import terminal  # noqa: PLC0415

    with ProgressView(terminal(sys.stderr)) as view:
        result = backfill(
            app,
            archive=archive,
            until=args.until,
            processors=args.processors,
            replace=args.replace,
            on_progress=BackfillProgress(view.add("backfill starting")),
        )
    manifest = result.manifest
    if result.replaced is not None:
        print(f"previous state moved to {result.replaced}")
    for j, target in sorted(manifest.targets.items()):
        offsets = ", ".join(f"{t}[{p}]@{o}" for (t, p), o in sorted(target.offsets.items()))
        print(f"processor {j}: {target.keys} keys, continues from {offsets}")
    read, applied = manifest.records_read, manifest.records_applied
    dead = manifest.records_dead_lettered
    print(
        f"backfill: {read} records read: {applied} applied, {dead} dead letters (not "
        f"applied; a backfill writes no dead-letter records), {read - applied - dead} "
        f"without a key; {result.processors} processor{'' if result.processors == 1 else 's'}, "
        f"{result.seconds:.1f}s ({result.records_per_second:,.0f} records/s)"
    )
    for record in manifest.skipped:
        print(record.describe())
    return 0


class BackfillProgress:
    """Shows the Spark job's progress: a bar over the current stage's tasks, records read,
    applied and dead-lettered (plain mode: a line every few seconds and at each phase)."""

    def __init__(self, task: ProgressTask) -> None:
        self._task = task

    def __call__(self, progress: BootstrapProgress) -> None:
        completed, total = progress.tasks_done, progress.tasks_total
        tasks = f"tasks {completed}/{total}, " if total else ""
        if progress.phase == "done":
            completed, total, tasks = 1, 1, ""
        self._task.update(
            completed,
            total or None,
            f"{tasks}{progress.records_read:,} records read, {progress.records_applied:,} "
            f"applied, {progress.records_dead_lettered:,} dead letters",
            description=f"backfill {progress.phase}",
        )
