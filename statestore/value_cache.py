"""A bounded cache of stored values in front of a backend, and staged batches (write-back).

``CachedBackend`` wraps the database's backend. Its ``reader`` (the per-record read path)
answers from a per-store dict of recent values before asking RocksDB; every write through it
updates the dict (write-through), so the dict never holds a value the backend does not, with
two exceptions that are its purpose:

- **staged batches**: ``stage`` puts a sealed batch's writes in the dict before they are
  written, so the next batches read them while the sealed one waits for Kafka (the runtime's
  pipelined commits). ``commit_staged`` writes the oldest staged batch; ``discard_staged``
  drops every staged batch and empties the dict (the runtime then reads the dropped records
  again). Staged values are never evicted.
- reads of missing keys are remembered as missing.

Writes that are not a staged batch's while batches are staged, range deletes and ingests while
batches are staged are refused: the staged values would hide them. Range deletes and ingests
empty the affected store's dict. The metadata store is not cached.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from itertools import islice
from operator import itemgetter
from pathlib import Path

from statestore.backend import Backend, Changes, RangeDeletes
from statestore.due_index import DUE_STORE, DueIndex
from statestore.errors import StateStoreError
from statestore.layout import META_STORE

__all__ = ["DEFAULT_CACHE_ENTRIES", "CachedBackend", "StagedChanges"]

#: values kept per store (a value is small next to RocksDB's own block cache)
DEFAULT_CACHE_ENTRIES = 100_000
_MISSING: object = object()
_KEY = itemgetter(0)

#: a staged batch's writes: store name -> (stored key, value or ``None``) pairs
StagedChanges = dict[str, list[tuple[bytes, bytes | None]]]


class CachedBackend:
    """``inner`` with a value cache of ``max_entries`` per store and staged batches."""

    def __init__(self, inner: Backend, max_entries: int = DEFAULT_CACHE_ENTRIES) -> None:
        if max_entries < 1:
            raise ValueError(f"a value cache holds at least 1 entry, got {max_entries}")
        self.inner = inner
        self.max_entries = max_entries
        self._values: dict[str, dict[bytes, bytes | None]] = {}
        #: store -> key -> the newest staged batch that wrote it (never evicted)
        self._pinned: dict[str, dict[bytes, int]] = {}
        self._staged: deque[int] = deque()
        self._next_token = 0
        #: the keys with something due (``DUE_STORE``), following every write made here
        self.due_index = DueIndex(self._due_items)

    # -- staged batches ----------------------------------------------------------------------

    @property
    def staged(self) -> int:
        """How many staged batches wait to be written."""
        return len(self._staged)

    def stage(self, changes: StagedChanges) -> int:
        """Make ``changes`` (a sealed batch's) visible to readers before they are written;
        returns the token to write them with (``commit_staged``), oldest first."""
        token = self._next_token
        self._next_token += 1
        for store, items in changes.items():
            if store == META_STORE:
                continue
            self._store_values(store).update(items)  # (as a loop of ``values[key] = value``)
            self._pinned.setdefault(store, {}).update(dict.fromkeys(map(_KEY, items), token))
            if store == DUE_STORE:
                self.due_index.changed(items)
        self._staged.append(token)
        return token

    def commit_staged(self, token: int, changes: StagedChanges) -> None:
        """Write the staged batch ``token`` (the oldest) with ``changes`` (everything it
        writes, metadata included, as staged): one atomic write."""
        if not self._staged or self._staged[0] != token:
            raise StateStoreError(
                f"staged batch {token} written out of order (oldest staged: "
                f"{self._staged[0] if self._staged else None}); staged batches commit in order"
            )
        self.inner.write(changes)
        self._staged.popleft()
        if not self._staged:
            self._pinned.clear()  # no batch is staged any more
        for store, items in changes.items():
            pinned = self._pinned.get(store)
            if pinned:
                for key, _value in items:
                    if pinned.get(key) == token:
                        del pinned[key]
            if store != META_STORE:
                self._evict(store, self._store_values(store))

    def discard_staged(self) -> None:
        """Drop every staged batch (never written) and every cached value."""
        self._staged.clear()
        self._pinned.clear()
        for values in self._values.values():
            values.clear()
        self.due_index.invalidate()

    # -- the Backend contract ----------------------------------------------------------------

    def store_names(self) -> list[str]:
        """The inner backend's stores."""
        return self.inner.store_names()

    def create_store(self, name: str) -> None:
        """Create store ``name`` in the inner backend."""
        self.inner.create_store(name)

    def get(self, store: str, key: bytes) -> bytes | None:
        """The written value of ``key`` (staged values are not written yet)."""
        return self.inner.get(store, key)

    def reader(self, store: str) -> Callable[[bytes], bytes | None]:
        """A ``get`` that sees staged values and answers from the cache when it can."""
        if store == META_STORE:
            return self.inner.reader(store)
        values = self._store_values(store)
        read = self.inner.reader(store)
        limit = self.max_entries
        evict = self._evict

        def cached(key: bytes) -> bytes | None:
            value = values.get(key, _MISSING)
            if value is not _MISSING:
                return value  # type: ignore[return-value]
            value = read(key)
            values[key] = value
            if len(values) > limit:
                evict(store, values)
            return value

        return cached

    def write(self, changes: Changes, ranges: RangeDeletes | None = None) -> None:
        """Write through to the inner backend (refused for user stores while batches are
        staged: they would hide it)."""
        lists = {store: list(items) for store, items in changes.items()}
        touched = [s for s in [*lists, *(ranges or {})] if s != META_STORE]
        if self._staged and touched:
            raise StateStoreError(
                f"a write to stores {sorted(set(touched))} while {len(self._staged)} batches "
                "are staged; commit or discard them first"
            )
        self.inner.write(lists, ranges)
        if DUE_STORE in (ranges or {}):
            self.due_index.invalidate()
        elif DUE_STORE in lists:
            self.due_index.changed(lists[DUE_STORE])
        for store in ranges or {}:
            self._store_values(store).clear()
        for store in touched:
            if store in lists:
                values = self._store_values(store)
                values.update(lists[store])
                self._evict(store, values)

    def scan(
        self, store: str, start: bytes | None = None, end: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """The inner backend's written items."""
        return self.inner.scan(store, start, end)

    def ingest(self, store: str, files: Sequence[Path]) -> None:
        """Ingest into the inner backend and forget the store's cached values."""
        if self._staged:
            raise StateStoreError(
                f"an ingest into {store!r} while {len(self._staged)} batches are staged; "
                "commit or discard them first"
            )
        self.inner.ingest(store, files)
        self._store_values(store).clear()
        if store == DUE_STORE:
            self.due_index.invalidate()

    def checkpoint(self, path: Path) -> None:
        """A checkpoint of the written state."""
        self.inner.checkpoint(path)

    def approximate_size(self) -> int:
        """The inner backend's size."""
        return self.inner.approximate_size()

    def close(self) -> None:
        """Close the inner backend; nothing staged is written."""
        self.discard_staged()
        self.inner.close()

    # -- internals ---------------------------------------------------------------------------

    def _due_items(self) -> Iterator[tuple[bytes, bytes | None]]:
        """``DUE_STORE`` as readers see it: written items, then staged values over them."""
        if DUE_STORE not in self.inner.store_names():
            return
        staged = self._pinned.get(DUE_STORE) or {}
        values = self._store_values(DUE_STORE)
        for key, value in self.inner.scan(DUE_STORE):
            if key not in staged:
                yield key, value
        for key in staged:
            yield key, values[key]

    def _store_values(self, store: str) -> dict[bytes, bytes | None]:
        values = self._values.get(store)
        if values is None:
            values = self._values[store] = {}
        return values

    def _evict(self, store: str, values: dict[bytes, bytes | None]) -> None:
        """Drop the oldest quarter of the entries when over the limit (not staged ones)."""
        if len(values) <= self.max_entries:
            return
        pinned = self._pinned.get(store) or {}
        doomed = list(islice(values, len(values) - self.max_entries * 3 // 4))
        for key in doomed:
            if key not in pinned:
                del values[key]
