"""Bringing back a processor that lost its disk from its newest snapshot.

A processor that starts with a missing or empty state directory, while the snapshot store
holds snapshots of it, downloads the newest one that covers every partition it owns now
(checking every file), gives the copy a new lineage and renames it into place. The runtime
then opens it as it would a directory rolled back to that batch: it rebuilds from the
snapshot's offsets up to the group's committed offsets without output, then goes on live.

A snapshot that does not cover a partition the processor owns now (taken before it took that
partition over) is not used: the state of that partition's keys in it may be a catch-up's,
half built. The processor then rebuilds as without snapshots, and says why.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

from framework.config import AppConfig
from rebalance.positions import Position
from statestore import DatabaseIdentity, StateStoreError
from statestore.checkpoints import open_checkpoint, save_checkpoint
from statestore.lock import DirectoryLock
from statestore.snapshot_copy import IMMUTABLE_SUFFIXES, SnapshotDownload
from statestore.snapshot_lineage import new_lineage
from statestore.snapshot_manifest import SnapshotManifest
from statestore.snapshot_store import SnapshotStore, store_errors

__all__ = ["directory_holds_state", "restore_lost_state"]

log = logging.getLogger(__name__)
_SLICE = 64 << 20


def restore_lost_state(
    config: AppConfig,
    identity: DatabaseIdentity,
    path: Path,
    owned: set[Position],
    epoch: str | None,
    *,
    holds_state: Callable[[Path], bool] | None = None,
    progress: Callable[[], None] = lambda: None,
) -> SnapshotManifest | None:
    """If ``path`` (processor ``identity.processor``'s state directory) is missing or empty,
    restore the newest usable snapshot there (of the control log's ``epoch``); returns it,
    or ``None`` when none was used. ``holds_state``: whether a state directory holds
    anything (default: it exists and is not empty); ``progress`` is called after each slice
    copied (the run's heartbeat). It holds the directory's lock meanwhile
    (``StoreLockedError`` when another run of the processor has it)."""
    holds = holds_state or directory_holds_state
    if not config.snapshots.enabled or holds(path):
        return None
    lock = DirectoryLock(path)
    try:
        if holds(path):  # another run restored it before this one had the lock
            return None
        return _restore(config, identity, path, owned, epoch, progress=progress)
    finally:
        lock.release()


def _restore(
    config: AppConfig,
    identity: DatabaseIdentity,
    path: Path,
    owned: set[Position],
    epoch: str | None,
    *,
    progress: Callable[[], None],
) -> SnapshotManifest | None:
    processor = identity.processor
    store = SnapshotStore(config.snapshot_url, config.app_id)
    try:
        manifests = store.manifests(processor)
    except store_errors() as error:
        log.warning(
            "processor %d lost its state directory and cannot list its snapshots in %s (%s); "
            "it rebuilds from Kafka instead",
            processor,
            store,
            error,
        )
        return None
    for manifest in reversed(manifests):
        if not manifest.belongs_to(identity.app_id, identity.fixed, epoch):
            log.warning(
                "snapshot %s is of another app, fixed parameters or control log (the app was "
                "started over); not used",
                manifest.id,
            )
            continue
        if not manifest.covers(owned):
            log.warning(
                "processor %d lost its state directory; its newest snapshot %s was taken "
                "before it owned %s, so it is not used: the processor rebuilds from Kafka",
                processor,
                manifest.id,
                sorted(owned - set(manifest.offsets)),
            )
            return None
        try:
            _download(store, manifest, path, progress)
        except store_errors(StateStoreError) as error:
            log.warning(
                "snapshot %s could not be restored (%s); trying an older one", manifest.id, error
            )
            continue
        log.info(
            "processor %d lost its state directory: restored snapshot %s (%d bytes, offsets "
            "%s); it rebuilds from there up to the group's committed offsets without output",
            processor,
            manifest.id,
            manifest.size,
            dict(sorted(manifest.offsets.items())),
        )
        return manifest
    return None


def directory_holds_state(path: Path) -> bool:
    """Whether ``path`` exists and is not empty."""
    return path.exists() and any(path.iterdir())


def _download(
    store: SnapshotStore, manifest: SnapshotManifest, path: Path, progress: Callable[[], None]
) -> None:
    """Copy ``manifest`` into a staging directory, start a new lineage, rename it to ``path``."""
    # under the directory's lock: any other staging directory was left by a killed restore
    for stale in path.parent.glob(f".{path.name}.restoring*"):
        shutil.rmtree(stale, ignore_errors=True)
    staging = path.with_name(f".{path.name}.restoring-{uuid.uuid4().hex[:12]}")
    download = SnapshotDownload(store, manifest, staging)
    try:
        while not download.step(_SLICE):
            progress()
    except BaseException:
        download.close()
        shutil.rmtree(staging, ignore_errors=True)
        raise
    backend = open_checkpoint(staging, read_only=False)
    try:
        files = [f for f in manifest.files if f.name.endswith(IMMUTABLE_SUFFIXES)]
        new_lineage(backend, files, staging)
    finally:
        save_checkpoint(backend, staging)
    try:
        if path.exists():
            path.rmdir()  # only ever empty here (checked under the lock)
        staging.rename(path)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        raise
