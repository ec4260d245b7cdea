"""The in-memory backend: the same contract as RocksDB, for fast tests and users' unit tests."""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from statestore.backend import Changes, RangeDeletes
from statestore.errors import StateStoreError

__all__ = ["MEMORY_CHECKPOINT", "MemoryBackend"]

#: the file an in-memory backend's checkpoint is
MEMORY_CHECKPOINT = "memory-state.json"


class MemoryBackend:
    """Named stores as sorted dicts in this process; nothing survives ``close``."""

    def __init__(self) -> None:
        self._stores: dict[str, dict[bytes, bytes]] = {}
        self._closed = False

    def _store(self, name: str) -> dict[bytes, bytes]:
        if self._closed:
            raise StateStoreError("the in-memory state store is closed")
        try:
            return self._stores[name]
        except KeyError:
            raise StateStoreError(
                f"store {name!r} does not exist; stores: {self.store_names()}"
            ) from None

    def store_names(self) -> list[str]:
        """The stores that exist."""
        return sorted(self._stores)

    def create_store(self, name: str) -> None:
        """Create store ``name`` if missing."""
        self._stores.setdefault(name, {})

    def get(self, store: str, key: bytes) -> bytes | None:
        """The value of ``key``."""
        return self._store(store).get(key)

    def reader(self, store: str) -> Callable[[bytes], bytes | None]:
        """The store dict's ``get``."""
        return self._store(store).get

    def write(self, changes: Changes, ranges: RangeDeletes | None = None) -> None:
        """Delete ``ranges``, then apply ``changes``; validated first, so a bad store name
        changes nothing."""
        targets = {name: self._store(name) for name in [*changes, *(ranges or {})]}
        staged = {name: list(items) for name, items in changes.items()}
        for name, spans in (ranges or {}).items():
            target = targets[name]
            for low, high in spans:
                for key in [k for k in target if low <= k < high]:
                    del target[key]
        for name, items in staged.items():
            target = targets[name]
            for key, value in items:
                if value is None:
                    target.pop(key, None)
                else:
                    target[key] = value

    def scan(
        self, store: str, start: bytes | None = None, end: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """Items in key order from ``start`` up to (not including) ``end``."""
        items = self._store(store)
        keys = sorted(items)
        first = 0 if start is None else bisect.bisect_left(keys, start)
        for key in keys[first:]:
            if end is not None and key >= end:
                return
            yield key, items[key]

    def ingest(self, store: str, files: Sequence[Path]) -> None:
        """Load SST files' items; they override existing keys, as in RocksDB."""
        from statestore.rocks import read_sst_files  # noqa: PLC0415 - rocksdict only when used

        target = self._store(store)
        for key, value in read_sst_files(files):
            target[key] = value

    def checkpoint(self, path: Path) -> None:
        """Write every store as JSON (hex keys and values) to ``path/memory-state.json``."""
        path.mkdir(parents=True)
        self.dump(path)

    def dump(self, path: Path) -> None:
        """Write (or rewrite) ``path/memory-state.json`` with every store."""
        dump = {
            name: {key.hex(): value.hex() for key, value in sorted(items.items())}
            for name, items in self._stores.items()
        }
        (path / MEMORY_CHECKPOINT).write_text(json.dumps(dump, indent=1))

    @classmethod
    def load(cls, path: Path) -> MemoryBackend:
        """A backend holding what ``checkpoint`` wrote to ``path``."""
        backend = cls()
        dump = json.loads((path / MEMORY_CHECKPOINT).read_text())
        backend._stores = {
            name: {bytes.fromhex(k): bytes.fromhex(v) for k, v in items.items()}
            for name, items in dump.items()
        }
        return backend

    def approximate_size(self) -> int:
        """Bytes of keys and values held."""
        return sum(len(k) + len(v) for s in self._stores.values() for k, v in s.items())

    def close(self) -> None:
        """Drop everything."""
        self._stores.clear()
        self._closed = True
