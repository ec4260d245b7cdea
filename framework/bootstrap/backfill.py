"""``splitstate backfill``: build every processor's state from the input's history.

For a first deployment on a topic that already has history, or after the processor logic
changed: Spark folds the whole history with the app's processor function (outputs
suppressed), each processor's state is ingested from SST files, and the processors start
from the offsets it covers. Existing state is never overwritten unless ``replace`` is given;
then it is moved aside, not deleted.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from framework.app import App
from framework.bootstrap.build import BuildRequest, build_state
from framework.bootstrap.history import history_positions, parse_until
from framework.bootstrap.manifest import Manifest
from framework.bootstrap.progress import BootstrapProgress
from framework.config import ConfigError
from framework.coordination.layout import AppLayout, prepare_app
from framework.coordination.registry import TopicEntry
from framework.kafka import Clients, Kafka, watermarks
from rebalance.positions import OffsetRange, Position
from statestore import DatabaseIdentity, ProcessorDatabase, processor_path
from statestore.lock import DirectoryLock
from statestore.owner_only import private_directory
from statestore.snapshot_store import SnapshotStore

__all__ = ["BackfillResult", "backfill"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BackfillResult:
    """What a backfill built."""

    processors: int
    manifest: Manifest
    seconds: float
    replaced: Path | None

    @property
    def records_per_second(self) -> float:
        """Records read per second, end to end (read, fold, SST, ingest)."""
        return self.manifest.records_read / max(self.seconds, 1e-9)


def backfill(
    app: App,
    *,
    archive: Path | None = None,
    until: str = "now",
    processors: int | None = None,
    replace: bool = False,
    on_progress: Callable[[BootstrapProgress], None] | None = None,
    kafka: Kafka | None = None,
) -> BackfillResult:
    """Build the state of every processor of ``app`` from history and ingest it.

    ``kafka``: the port to the app's cluster (by default the clients of the app's config).
    """
    started = time.monotonic()
    config = app.config
    if processors is not None and processors != config.processor_count:
        app.configure(config.model_copy(update={"processors": processors}))
        config = app.config
    kafka = Clients.of(config) if kafka is None else kafka
    layout = prepare_app(app, kafka, backfilling=True)
    _check_not_scaling(layout, processors)
    _check_no_change(layout)
    count = layout.processors
    positions = history_positions(config, layout.inputs)  # deleted partitions too
    retained = watermarks(kafka, positions)
    if until == "now":
        ends = {p: retained[p].end for p in positions}
    else:
        ends = parse_until(until, positions)
    ranges = {p: OffsetRange(0, end) for p, end in ends.items()}
    state_dir = config.app_state_dir
    existing = _existing_state(state_dir)
    _check_no_group_progress(kafka, app, positions, replace, existing)
    replaced = _move_aside(state_dir, existing) if existing and replace else None
    if existing and not replace:
        raise ConfigError(
            f"state already exists in {state_dir} ({', '.join(p.name for p in existing)}). "
            "Backfill builds every processor's state anew and will not overwrite it. Fix: "
            "stop the processors and pass --replace (the old state is moved to "
            f"{state_dir}/replaced-<time>/, not deleted), or point state_dir elsewhere."
        )
    # before anything is built or loaded: a processor started meanwhile, or a backfill that
    # stops midway, finds no snapshot of the old state to restore under the new one (and a
    # backfill that cannot reach the store builds nothing)
    _forget_snapshots(app)
    counts = {name: entry.history.created for name, entry in layout.inputs.items()}
    covers = {j: sorted(layout.control.owned(j, counts)) for j in range(count)}
    request = BuildRequest(
        processors=count,
        covers=covers,
        ranges=ranges,
        retained=retained,
        entries=layout.inputs,
        archive=archive,
        exact=until != "now",
    )
    destination = config.bootstrap_dir / f"backfill-{time.strftime('%Y%m%d-%H%M%S')}"
    manifest = build_state(app, request, destination, on_progress)
    for j in range(count):
        identity = DatabaseIdentity(config.app_id, j, layout.fixed_parameters())
        path = processor_path(state_dir, j)
        with ProcessorDatabase.open(path, identity, app.store_specs()) as database:
            target = manifest.targets[j]
            database.bulk_load(manifest.files(j), target.offsets, progress=target.progress())
            database.checked_fresh()  # built from every key's whole history
    shutil.rmtree(destination, ignore_errors=True)
    return BackfillResult(count, manifest, time.monotonic() - started, replaced)


def _forget_snapshots(app: App) -> None:
    """Delete the app's snapshots: they hold the state from before the backfill, which a
    processor that lost its disk must never restore (its next snapshots replace them)."""
    config = app.config
    if not config.snapshots.enabled:
        return
    store = SnapshotStore(config.snapshot_url, config.app_id)
    for processor in store.processors():
        store.delete_processor(processor)
        log.info("deleted processor %d's snapshots (state from before the backfill)", processor)


def _check_not_scaling(layout: AppLayout, processors: int | None) -> None:
    scale = layout.control.scaling
    if scale is not None:
        raise ConfigError(
            f"a scale to {scale.new_processors} processors (generation {scale.generation}) is "
            "in progress; backfill needs a settled app. Fix: wait until it completes "
            "(`splitstate status`), then backfill."
        )
    if processors is not None and processors != layout.processors:
        raise ConfigError(
            f"app {layout.definition.app_id!r} runs {layout.processors} processors (its control "
            f"log), not {processors}. Backfill builds the state of the processors the app runs. "
            f"Fix: backfill without --processors (or with --processors {layout.processors}), "
            "then scale with `splitstate scale`."
        )


def _check_no_change(layout: AppLayout) -> None:
    """Refuse while an input's partition count is changing: until ``splitstate expand``
    recorded every growth marker and drain marker, the order of its keys' records is not
    settled."""
    changing = [
        f"input topic {name!r} {_change(entry)}"
        for name, entry in layout.inputs.items()
        if entry.growth is not None or entry.pending()
    ]
    if changing:
        raise ConfigError(
            f"{'; '.join(changing)}: `splitstate expand` has not recorded every "
            "marker (growth) or drain marker (shrink) yet, so the order of their keys' "
            "records is not settled. Fix: let the expand command finish (run it again to "
            "resume it), then backfill."
        )


def _change(entry: TopicEntry) -> str:
    """What change of ``entry``'s partition count is in progress, in words."""
    change, history = entry.growth, entry.history
    if change is not None:
        kind, count = change.kind, change.partitions
    else:
        step = history.last_step
        kind, count = ("grow", history.partitions) if step is None else (step.kind, step.count)
    pending = entry.pending()
    markers = "markers" if kind == "grow" else "drain markers"
    detail = f"{markers} of {pending} not recorded" if pending else "not finished"
    verb = "growing" if kind == "grow" else "shrinking"
    return f"is {verb} to {count} partitions ({detail})"


def _existing_state(state_dir: Path) -> list[Path]:
    if not state_dir.exists():
        return []
    return sorted(p for p in state_dir.glob("processor-*") if p.is_dir() and any(p.iterdir()))


def _check_no_group_progress(
    kafka: Kafka, app: App, positions: list[Position], replace: bool, existing: list[Path]
) -> None:
    """Processors elsewhere leave no local state, but their consumer group commits."""
    if replace or existing:
        return
    config = app.config
    with kafka.consumer(config.app_id) as consumer:
        committed = consumer.committed(positions)
    progressed = [f"{t}[{p}]@{offset}" for (t, p), offset in committed.items() if offset > 0]
    if progressed:
        raise ConfigError(
            f"app {config.app_id!r} has processed records already (consumer group offsets "
            f"{', '.join(progressed[:8])}), so its processors hold live state, perhaps on "
            "other machines. Fix: stop every processor and pass --replace; each processor's "
            "state directory must then be removed or replaced by the backfilled one."
        )


def _move_aside(state_dir: Path, existing: list[Path]) -> Path:
    """Move existing processor state to ``replaced-<time>`` (refusing if any is in use)."""
    locks = [DirectoryLock(path) for path in existing]
    try:
        target = state_dir / f"replaced-{time.strftime('%Y%m%d-%H%M%S')}"
        private_directory(target, exist_ok=False)
        for path in existing:
            path.rename(target / path.name)
        return target
    finally:
        for lock in locks:
            lock.release()
