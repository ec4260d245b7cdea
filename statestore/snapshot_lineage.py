"""A database's lineage: the name under which its SST files are kept in the snapshot store.

Stored in the metadata store under ``snapshot/lineage`` as JSON: ``{"id": <hex>,
"inherited": [<file>...]}``. A database gets one at its first snapshot; a database restored
from a snapshot gets a new one (its next files may reuse names the lost database used after
that snapshot) that *inherits* the snapshot's SST files, which it holds unchanged, so they are
not copied again.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from statestore.backend import Backend
from statestore.layout import META_STORE
from statestore.snapshot_manifest import SnapshotFile

__all__ = ["LINEAGE_KEY", "Lineage", "lineage_of", "new_lineage"]

LINEAGE_KEY = b"snapshot/lineage"


@dataclass(frozen=True)
class Lineage:
    """A database's lineage id and the store's files it holds from a restored snapshot."""

    id: str
    inherited: dict[str, SnapshotFile]


def new_lineage(backend: Backend, inherited: Iterable[SnapshotFile] = ()) -> Lineage:
    """Give the database in ``backend`` a new lineage (inheriting ``inherited``) and return it."""
    lineage = Lineage(uuid.uuid4().hex[:16], {f.name: f for f in inherited})
    record = {"id": lineage.id, "inherited": [f.to_json() for f in lineage.inherited.values()]}
    backend.write({META_STORE: [(LINEAGE_KEY, json.dumps(record).encode())]})
    return lineage


def lineage_of(backend: Backend) -> Lineage:
    """The database's lineage (a new one on its first snapshot)."""
    raw = backend.get(META_STORE, LINEAGE_KEY)
    if raw is None:
        return new_lineage(backend)
    record = json.loads(raw)
    inherited = {
        f["name"]: SnapshotFile(f["name"], f["path"], int(f["size"]), f["sha256"])
        for f in record.get("inherited", [])
    }
    return Lineage(str(record["id"]), inherited)
