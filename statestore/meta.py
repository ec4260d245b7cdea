"""A database's metadata store records: what a new database holds, and reading its meta."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from statestore.backend import Backend
from statestore.errors import StoreConflictError, StoreCorruptError
from statestore.layout import (
    FORMAT_VERSION,
    FRESH_DIRECTORY_FLAG,
    META_KEY,
    META_STORE,
    OFFSET_PREFIX,
    flag_key,
)

__all__ = ["creation_records", "delete_meta", "prefix_end", "read_meta"]


def creation_records(identity: dict[str, Any]) -> list[tuple[bytes, bytes | None]]:
    """What a new database's metadata store holds: its ``identity`` (the ``meta`` record's
    JSON), and the fresh flag."""
    return [
        (META_KEY, json.dumps(identity).encode()),
        (flag_key(FRESH_DIRECTORY_FLAG), b"1"),
    ]


def prefix_end(prefix: bytes) -> bytes:
    """The first key after every key starting with ``prefix`` (which ends below 0xff)."""
    return prefix[:-1] + bytes([prefix[-1] + 1])


def read_meta(backend: Backend, path: Path | None) -> dict[str, Any]:
    """The metadata of the database in ``backend`` (at ``path``, for messages); raises
    ``StoreCorruptError`` without it and ``StoreConflictError`` for another format."""
    raw = backend.get(META_STORE, META_KEY) if META_STORE in backend.store_names() else None
    if raw is None:
        raise StoreCorruptError(
            f"{path} is a RocksDB database without splitstate's metadata: not a splitstate "
            "state directory, or damaged. Nothing was deleted. Fix: move it aside, or point "
            "state_dir elsewhere."
        )
    meta: dict[str, Any] = json.loads(raw)
    found = meta.get("format")
    if found != FORMAT_VERSION:
        if isinstance(found, int) and found < FORMAT_VERSION:
            fix = (
                "rebuild it in this format: `splitstate backfill MODULE:APP --replace` moves "
                "the app's state aside and builds it anew from the input's history or an "
                "archive; or keep running the splitstate version that wrote it"
            )
        else:
            fix = "use the splitstate version that wrote it"
        raise StoreConflictError(
            f"{path} uses state format {found}, this splitstate reads format {FORMAT_VERSION} "
            "(format 2 stores keys ordered by linear-hash bucket; format 1 in plain key "
            f"order). Nothing was changed. Fix: {fix}."
        )
    return meta


def delete_meta(backend: Backend, prefixes: Sequence[bytes], keys: Sequence[bytes] = ()) -> int:
    """Delete every metadata entry whose key starts with one of ``prefixes``, and the
    entries ``keys`` (progress scopes, flags, crash attempts of something finished), in
    one write; returns how many. Input offsets are never deleted this way (their cache
    lives in ``ProcessorDatabase``: ``delete_ranges(forget=...)`` deletes them)."""
    doomed = [
        key
        for prefix in prefixes
        if not prefix.startswith(OFFSET_PREFIX)
        for key, _value in backend.scan(META_STORE, prefix, prefix_end(prefix))
    ]
    doomed += [
        key
        for key in keys
        if not key.startswith(OFFSET_PREFIX) and backend.get(META_STORE, key) is not None
    ]
    if doomed:
        backend.write({META_STORE: [(key, None) for key in doomed]})
    return len(doomed)
