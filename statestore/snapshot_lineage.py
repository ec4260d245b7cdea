"""A database's lineage: the name under which its SST files are kept in the snapshot store.

Stored in the metadata store under ``snapshot/lineage`` as JSON: ``{"id": <hex>,
"inherited": [<file>...], "anchor": <device:inode:ctime of the directory's IDENTITY file>}``. A
database gets one at its first snapshot. RocksDB never reuses a file name within one
database, but a database that continues from an older point of its history may reuse the
names its lost future used, so it must write under a new lineage:

- a database restored from a snapshot gets a new one (``new_lineage``) that *inherits* the
  snapshot's SST files, which it holds unchanged, so they are not copied again;
- a directory copied back from a backup (or otherwise copied) keeps the record, but its
  IDENTITY file is another file: the anchor no longer matches, and it gets a new lineage
  that inherits nothing.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from statestore.backend import Backend
from statestore.layout import META_STORE
from statestore.snapshot_manifest import SnapshotFile

__all__ = ["LINEAGE_KEY", "Lineage", "lineage_of", "new_lineage"]

LINEAGE_KEY = b"snapshot/lineage"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Lineage:
    """A database's lineage id and the store's files it holds from a restored snapshot."""

    id: str
    inherited: dict[str, SnapshotFile]


def _anchor(path: Path | None) -> str | None:
    """Which file the directory's RocksDB IDENTITY is (``None``: no directory, or none yet)."""
    if path is None:
        return None
    try:
        stat = (path / "IDENTITY").stat()
    except OSError:
        return None
    # a copy is a new file: another inode, or the same one reused, but never the same ctime
    return f"{stat.st_dev}:{stat.st_ino}:{stat.st_ctime_ns}"


def _write(backend: Backend, lineage: Lineage, anchor: str | None) -> None:
    record = {
        "id": lineage.id,
        "inherited": [f.to_json() for f in lineage.inherited.values()],
        "anchor": anchor,
    }
    backend.write({META_STORE: [(LINEAGE_KEY, json.dumps(record).encode())]})


def new_lineage(
    backend: Backend, inherited: Iterable[SnapshotFile] = (), path: Path | None = None
) -> Lineage:
    """Give the database in ``backend`` (in directory ``path``) a new lineage inheriting
    ``inherited``, and return it."""
    lineage = Lineage(uuid.uuid4().hex[:16], {f.name: f for f in inherited})
    _write(backend, lineage, _anchor(path))
    return lineage


def lineage_of(backend: Backend, path: Path | None = None) -> Lineage:
    """The lineage of the database in ``backend`` (in directory ``path``): a new one on its
    first snapshot, or when the directory is a copy of the one that recorded it."""
    raw = backend.get(META_STORE, LINEAGE_KEY)
    if raw is None:
        return new_lineage(backend, path=path)
    record = json.loads(raw)
    lineage = Lineage(
        str(record["id"]),
        {
            f["name"]: SnapshotFile(f["name"], f["path"], int(f["size"]), f["sha256"])
            for f in record.get("inherited", [])
        },
    )
    anchor, recorded = _anchor(path), record.get("anchor")
    if recorded is None and anchor is not None:
        _write(backend, lineage, anchor)  # restored: RocksDB wrote IDENTITY when it opened
    elif recorded is not None and anchor is not None and recorded != anchor:
        log.warning(
            "state in %s is a copy of the directory that recorded lineage %s (a backup put "
            "back?): its new files start a new lineage in the snapshot store",
            path,
            lineage.id,
        )
        return new_lineage(backend, path=path)
    return lineage
