"""Recording and finishing a bulk load: SST files ingested, then the offsets they cover.

The plan (files per store, offsets, scope, and progress values written with the offsets) is
written to the metadata store first, so a crash
at any point is finished by ``finish_bulk_load`` on the next open (the files must still exist).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from statestore.backend import Backend
from statestore.errors import StoreCorruptError
from statestore.layout import BULK_LOAD_KEY, META_STORE, offset_key

__all__ = ["finish_bulk_load", "record_bulk_load"]


def record_bulk_load(
    backend: Backend,
    files: Mapping[str, Sequence[Path]],
    offsets: Mapping[tuple[str, int], int],
    scope: str | None,
    progress: Mapping[str, Mapping[tuple[str, int], int]] | None = None,
) -> None:
    """Write the plan of a bulk load (before any of its files is ingested); ``progress``:
    per scope, values written with the offsets (in the same write)."""
    plan = {
        "files": {store: [str(Path(f).resolve()) for f in paths] for store, paths in files.items()},
        "offsets": [[topic, partition, offset] for (topic, partition), offset in offsets.items()],
        "scope": scope,
        "progress": [
            [name, topic, partition, value]
            for name, values in (progress or {}).items()
            for (topic, partition), value in values.items()
        ],
    }
    backend.write({META_STORE: [(BULK_LOAD_KEY, json.dumps(plan).encode())]})


def finish_bulk_load(
    backend: Backend, where: Path | None
) -> tuple[str | None, dict[tuple[str, int], int]] | None:
    """Ingest a recorded bulk load's files, then write its offsets (and its progress values)
    and forget the plan; returns ``(scope, offsets)``, or ``None`` when no load is recorded."""
    raw = backend.get(META_STORE, BULK_LOAD_KEY)
    if raw is None:
        return None
    plan = json.loads(raw)
    missing = [f for paths in plan["files"].values() for f in paths if not Path(f).exists()]
    if missing:
        raise StoreCorruptError(
            f"an interrupted bulk load into {where} needs files that are gone: "
            f"{missing[:3]}. Nothing was deleted. Fix: move this state directory aside and "
            "rebuild it (bootstrap again), or restore the files."
        )
    for store, paths in plan["files"].items():
        if paths:
            backend.ingest(store, [Path(p) for p in paths])
    offsets = {(topic, int(partition)): int(offset) for topic, partition, offset in plan["offsets"]}
    scope = plan.get("scope")
    finished: list[tuple[bytes, bytes | None]] = [(BULK_LOAD_KEY, None)]
    for (topic, partition), offset in offsets.items():
        finished.append((offset_key(topic, partition, scope), str(offset).encode()))
    for name, topic, partition, value in plan.get("progress", []):
        finished.append((offset_key(topic, int(partition), name), str(int(value)).encode()))
    backend.write({META_STORE: finished})
    return scope, offsets
