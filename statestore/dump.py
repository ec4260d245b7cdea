"""Reading state for people and tools: JSON lines of every value, and committed offsets."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from statestore.codec import OWN_STORES
from statestore.database import ProcessorDatabase
from statestore.due_index import DUE_STORE, readable_due
from statestore.errors import StateStoreError

#: how a value of one of splitstate's own stores (bytes) is shown, by store
Readers = Mapping[str, Callable[[bytes], Any]]

__all__ = ["dump_records", "find_processor_dirs", "offset_records"]

_PROCESSOR_DIR = re.compile(r"^processor-(\d+)$")


def find_processor_dirs(state_dir: Path, processor: int | None = None) -> list[tuple[int, Path]]:
    """``(J, path)`` of the processor databases in ``state_dir`` (or ``state_dir`` itself)."""
    state_dir = state_dir.expanduser()
    if (state_dir / "CURRENT").exists():
        with ProcessorDatabase.open_read_only(state_dir) as database:
            found = [(database.identity.processor, state_dir)]
    elif state_dir.is_dir():
        found = sorted(
            (int(match.group(1)), child)
            for child in state_dir.iterdir()
            if (match := _PROCESSOR_DIR.match(child.name)) and (child / "CURRENT").exists()
        )
    else:
        raise StateStoreError(
            f"state directory {state_dir} does not exist. Fix: pass the app's state_dir "
            "(it holds processor-<J> directories) with --dir."
        )
    if processor is not None:
        found = [(j, path) for j, path in found if j == processor]
        if not found:
            raise StateStoreError(f"no state for processor {processor} in {state_dir}")
    if not found:
        raise StateStoreError(
            f"{state_dir} holds no processor state (no processor-<J> directories with a "
            "RocksDB database). Fix: pass the app's state_dir with --dir."
        )
    return found


def _key_fields(key: bytes) -> dict[str, Any]:
    try:
        return {"key": key.decode("utf-8")}
    except UnicodeDecodeError:
        return {"key": base64.b64encode(key).decode("ascii"), "key_encoding": "base64"}


def _bytes_value(raw: bytes) -> Any:
    """A value of splitstate's own stores without a reader: its JSON, or base64."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {"base64": base64.b64encode(raw).decode("ascii")}


def dump_records(
    state_dir: Path,
    store: str | None = None,
    processor: int | None = None,
    readers: Readers | None = None,
) -> Iterator[dict[str, Any]]:
    """One dict per stored value: processor, store, key (text or base64) and JSON value.
    Values of splitstate's own stores (bytes) are shown by ``readers`` (by store; due times
    always), else as their JSON or base64."""
    shown: dict[str, Callable[[bytes], Any]] = {DUE_STORE: readable_due, **(readers or {})}
    for j, path in find_processor_dirs(state_dir, processor):
        with ProcessorDatabase.open_read_only(path) as database:
            names = database.store_names()
            if store is not None:
                if store not in names:
                    raise StateStoreError(
                        f"processor {j} has no store {store!r}; its stores: {names}"
                    )
                names = [store]
            for name in names:
                show = shown.get(name, _bytes_value) if name.startswith(OWN_STORES) else None
                for key, stored in database.items(name):
                    value = stored if show is None else show(stored)
                    yield {"processor": j, "store": name, **_key_fields(key), "value": value}


def offset_records(state_dir: Path, processor: int | None = None) -> Iterator[dict[str, Any]]:
    """One dict per committed input offset: processor, topic, partition, next offset."""
    for j, path in find_processor_dirs(state_dir, processor):
        with ProcessorDatabase.open_read_only(path) as database:
            for (topic, partition), offset in sorted(database.offsets().items()):
                yield {"processor": j, "topic": topic, "partition": partition, "offset": offset}
