"""A processor's database: its named stores, its input offsets, snapshots and bulk loads.

``ProcessorDatabase.open(path, identity, stores)`` opens (or creates) processor ``J``'s RocksDB;
``ProcessorDatabase.in_memory(identity, stores)`` gives the same API without disk. A database
records who it belongs to (app id, processor id, the app's fixed parameters) and refuses to
open for anyone else; its directory and its snapshots are owner-only (``0700``:
``statestore.owner_only``). User keys are stored behind a bucket prefix
(``statestore.key_layout``) that callers never see, except as the order of ``items``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from statestore.backend import Backend
from statestore.batch import StateBatch
from statestore.bulk_load import finish_bulk_load, record_bulk_load
from statestore.codec import OWN_STORES, Codec, RawBytes, codec_for
from statestore.errors import StateStoreError, StoreConflictError, StoreCorruptError
from statestore.identity import DatabaseIdentity, StoreSpec
from statestore.key_layout import KeyLayout, KeyRange
from statestore.layout import (
    BULK_LOAD_KEY,
    FRESH_DIRECTORY_FLAG,
    META_STORE,
    OFFSET_PREFIX,
    flag_key,
    note_key,
    offset_key,
    offset_prefix,
    parse_offset_key,
)
from statestore.lock import DirectoryLock
from statestore.memory import MemoryBackend
from statestore.meta import creation_records, prefix_end, read_meta
from statestore.owner_only import made_private, private_directory
from statestore.value_cache import CachedBackend

__all__ = ["DatabaseIdentity", "ProcessorDatabase", "StoreSpec"]


class ProcessorDatabase:
    """One processor's state: named stores plus offsets, written together in batches."""

    def __init__(
        self,
        backend: Backend,
        identity: DatabaseIdentity,
        codecs: Mapping[str, Codec[Any]],
        path: Path | None = None,
        lock: DirectoryLock | None = None,
    ) -> None:
        #: the backend behind a value cache (where the runtime stages sealed batches)
        self.backend = backend if isinstance(backend, CachedBackend) else CachedBackend(backend)
        self.identity = identity
        self.path = path
        #: whether opening it created it (a new, or a lost, state directory)
        self.created = False
        self._codecs = dict(codecs)
        self._lock = lock
        #: how user keys are stored (the prefix of the app's initial processor count)
        self.layout = KeyLayout(int(identity.fixed.get("initial_processors", 1)))
        self._offsets = self._read_offsets()

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: Path,
        identity: DatabaseIdentity,
        stores: Sequence[StoreSpec],
        fsync: bool = False,
    ) -> ProcessorDatabase:
        """Open processor state at ``path``, creating it on first use (owner-only; one that
        other users may enter is made so, and a warning says so).

        Raises ``StoreLockedError`` when another live process has it open,
        ``StoreConflictError`` when it belongs to another app, processor or fixed parameters,
        and ``StoreCorruptError`` when it is damaged or half-written (nothing is deleted).
        """
        from statestore.rocks import RocksBackend  # noqa: PLC0415 - rocksdict only when used

        path = path.expanduser().resolve()
        lock = DirectoryLock(path)
        try:
            created = not path.exists() or not any(path.iterdir())
            if created:
                cls._create(path, identity)
            elif not (path / "CURRENT").exists():
                raise StoreCorruptError(
                    f"{path} holds files but no RocksDB database (no CURRENT file): it is "
                    "not a splitstate state directory, or its creation was interrupted. "
                    "Nothing was deleted. Fix: move it aside, or point state_dir elsewhere."
                )
            else:
                private_directory(path)  # one an older splitstate left open to other users
            backend = RocksBackend(path, fsync=fsync)
            try:
                database = cls._attach(backend, identity, stores, path, lock)
            except BaseException:
                backend.close()
                raise
            database.created = created
        except BaseException:
            lock.release()
            raise
        return database

    @classmethod
    def in_memory(
        cls,
        identity: DatabaseIdentity,
        stores: Sequence[StoreSpec],
        backend: MemoryBackend | None = None,
        path: Path | None = None,
    ) -> ProcessorDatabase:
        """A database in this process only (tests); ``backend``: one to keep it in, opened
        as ``open`` opens a directory when it holds one; ``path``: its name in messages."""
        if backend is None:
            backend = MemoryBackend()
        if created := META_STORE not in backend.store_names():
            backend.create_store(META_STORE)
            backend.write({META_STORE: creation_records(identity.to_json())})
        database = cls._attach(backend, identity, stores, path, None)
        database.created = created
        return database

    @classmethod
    def open_read_only(cls, path: Path) -> ProcessorDatabase:
        """Read existing state (tools, status): no lock, JSON values (bytes for splitstate's
        own stores, ``splitstate.*``); safe while it is written."""
        from statestore.rocks import RocksBackend  # noqa: PLC0415

        path = path.expanduser().resolve()
        if not (path / "CURRENT").exists():
            raise StateStoreError(
                f"{path} is not a splitstate state directory (no RocksDB CURRENT file). "
                "Fix: pass the directory that holds processor-<J> directories with --dir."
            )
        backend = RocksBackend(path, read_only=True)
        meta = read_meta(backend, path)
        identity = DatabaseIdentity(meta["app_id"], meta["processor"], meta.get("fixed", {}))
        names = [name for name in backend.store_names() if name != META_STORE]
        codecs = {n: codec_for(RawBytes if n.startswith(OWN_STORES) else None) for n in names}
        return cls(backend, identity, codecs, path, None)

    @staticmethod
    def _create(path: Path, identity: DatabaseIdentity) -> None:
        """Create the database under a temporary name, then rename it into place."""
        from statestore.rocks import RocksBackend  # noqa: PLC0415

        staging = path.with_name(f".{path.name}.creating-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)  # our own leftover from a crash
        private_directory(staging, exist_ok=False)
        backend = RocksBackend(staging)
        try:
            backend.create_store(META_STORE)
            backend.write({META_STORE: creation_records(identity.to_json())})
        finally:
            backend.close()
        if path.exists():
            path.rmdir()  # only ever an empty directory here
        staging.rename(path)

    @classmethod
    def _attach(
        cls,
        backend: Backend,
        identity: DatabaseIdentity,
        stores: Sequence[StoreSpec],
        path: Path | None,
        lock: DirectoryLock | None,
    ) -> ProcessorDatabase:
        where = str(path) if path else "memory"
        meta = read_meta(backend, path)
        stored = DatabaseIdentity(meta["app_id"], meta["processor"], meta.get("fixed", {}))
        if stored.app_id != identity.app_id or stored.processor != identity.processor:
            raise StoreConflictError(
                f"state in {where} belongs to app {stored.app_id!r} processor "
                f"{stored.processor}, not app {identity.app_id!r} processor "
                f"{identity.processor}. Fix: give each app and processor its own state "
                "directory (state_dir/processor-<J>)."
            )
        if dict(stored.fixed) != dict(identity.fixed):
            raise StoreConflictError(
                f"state in {where} was built with fixed parameters {dict(stored.fixed)}, "
                f"but the app now has {dict(identity.fixed)}. These can never change for an "
                "app. Fix: restore the original values in the config, or deploy under a new "
                "app_id (and rebuild its state with `splitstate backfill`)."
            )
        names = [spec.name for spec in stores]
        if len(set(names)) != len(names):
            raise ValueError(f"store names must be unique, got {names}")
        for spec in stores:
            backend.create_store(spec.name)
        codecs = {spec.name: codec_for(spec.value_type) for spec in stores}
        database = cls(backend, identity, codecs, path, lock)
        if backend.get(META_STORE, BULK_LOAD_KEY) is not None:
            database.resume_bulk_load()
        return database

    # -- using -----------------------------------------------------------------------------

    def begin(self) -> StateBatch:
        """A new batch; commit it to write its state changes and offsets atomically."""
        return StateBatch(self.backend, self._codecs, self.layout, self._offsets.update)

    def offsets(self) -> dict[tuple[str, int], int]:
        """The next input offset to process per ``(topic, partition)``, as committed."""
        return dict(self._offsets)

    def progress(self, scope: str) -> dict[tuple[str, int], int]:
        """Offsets recorded with ``StateBatch.set_progress`` in ``scope``."""
        prefix = offset_prefix(scope)
        return {
            parse_offset_key(key, scope): int(value)
            for key, value in self.backend.scan(META_STORE, prefix, prefix_end(prefix))
        }

    def has_flag(self, name: str) -> bool:
        """Whether ``StateBatch.set_flag(name)`` was committed."""
        return self.backend.get(META_STORE, flag_key(name)) is not None

    @property
    def fresh(self) -> bool:
        """Whether this database was created (new, or after its directory was lost) and no
        run has yet confirmed that what it owned then can be built here (``checked_fresh``).
        Unlike ``created`` it survives a run killed before that check."""
        return self.has_flag(FRESH_DIRECTORY_FLAG)

    def checked_fresh(self) -> None:
        """Note that a run checked the partitions this new database owned (``fresh``)."""
        self.backend.write({META_STORE: [(flag_key(FRESH_DIRECTORY_FLAG), None)]})

    def delete_keys(self, belongs: Callable[[bytes], bool], chunk: int = 10_000) -> int:
        """Delete every key (in every store) for which ``belongs(key)``; returns how many.

        Scans every key and deletes in committed chunks; ``delete_ranges`` deletes a scale's
        keys without reading them.
        """
        deleted = 0
        user = self.layout.user
        for store in self.store_names():
            doomed = [key for key, _ in self.backend.scan(store) if belongs(user(key))]
            for start in range(0, len(doomed), chunk):
                self.backend.write({store: [(key, None) for key in doomed[start : start + chunk]]})
            deleted += len(doomed)
        return deleted

    def delete_ranges(
        self,
        initial: int,
        ranges: Sequence[KeyRange],
        meta: Sequence[tuple[bytes, bytes | None]] = (),
        *,
        forget: Collection[tuple[str, int]] = (),
    ) -> None:
        """Delete the keys whose prefix lies in ``ranges`` (computed for ``initial``
        processors at the start) from every store (range deletes, reading nothing), with
        the metadata changes ``meta`` and the input offsets of the partitions ``forget``
        removed, in one atomic write."""
        if initial != self.layout.initial:
            raise StateStoreError(
                f"key ranges computed for {initial} initial processors do not fit "
                f"{self.path or 'this database'}, whose keys are ordered for "
                f"{self.layout.initial}: that would delete other keys. Fix: open the database "
                "with the app's fixed parameters (initial_processors)."
            )
        changes = [*meta, *((offset_key(t, p), None) for t, p in forget)]
        self.backend.write(
            {META_STORE: changes} if changes else {},
            {store: list(ranges) for store in self.store_names()} if ranges else None,
        )
        for position in forget:
            self._offsets.pop(position, None)

    def note(self, name: str) -> str | None:
        """The text noted under ``name`` (``set_note``), or ``None``."""
        raw = self.backend.get(META_STORE, note_key(name))
        return None if raw is None else bytes(raw).decode()

    def set_note(self, name: str, text: str) -> None:
        """Note ``text`` under ``name`` (one write)."""
        self.backend.write({META_STORE: [(note_key(name), text.encode())]})

    def store_names(self) -> list[str]:
        """The user stores this database was opened with."""
        return sorted(self._codecs)

    def items(self, store: str, within: KeyRange | None = None) -> Iterator[tuple[bytes, Any]]:
        """Committed ``(key, value)`` items of ``store`` in stored order (by bucket prefix,
        not by key); ``within``: only the keys whose prefix lies in that range."""
        codec = self._codec(store)
        user = self.layout.user
        low, high = within if within is not None else (None, None)
        for key, raw in self.backend.scan(store, low, high):
            yield user(key), codec.decode(raw)

    def get(self, store: str, key: bytes, default: Any = None) -> Any:
        """The committed value of ``key`` in ``store``."""
        raw = self.backend.get(store, self.layout.stored(key))
        return default if raw is None else self._codec(store).decode(raw)

    def size_bytes(self) -> int:
        """Approximate size of the state."""
        return self.backend.approximate_size()

    def snapshot(self, path: Path) -> Path:
        """A consistent copy of the whole database at the last committed batch, in a new
        owner-only directory (``made_private``).

        The copy opens like any processor directory (copy it to ``processor-<J>``).
        """
        path = path.expanduser().resolve()
        if path.exists():
            raise StateStoreError(f"snapshot target {path} already exists; choose a new path")
        return made_private(path, self.backend.checkpoint)

    # -- bulk load -------------------------------------------------------------------------

    def bulk_load(
        self,
        files: Mapping[str, Sequence[Path]],
        offsets: Mapping[tuple[str, int], int],
        scope: str | None = None,
        recorded: Callable[[], None] | None = None,
        *,
        progress: Mapping[str, Mapping[tuple[str, int], int]] | None = None,
    ) -> None:
        """Ingest sorted SST files per store, then record ``offsets``: the state they cover.

        The files hold stored keys (bucket prefix and all: ``SstRunWriter`` with this
        database's ``layout`` writes them); plain keys would be ingested where no read finds
        them.
        ``offsets`` become input offsets, or progress offsets of ``scope`` (e.g. a catch-up
        that continues from them). Ingested keys override existing values of the same keys;
        other keys are untouched; later batches override ingested values. A crash mid-way is
        finished on the next open (the files must still exist). ``recorded`` is called once
        the load is recorded, before any file is ingested (crash tests kill the process there).
        ``progress``: per scope, values recorded with the offsets, in the same write (e.g. the
        marks of a canonical order at them: ``progress(scope)`` reads them).
        """
        for store in files:
            self._codec(store)
        record_bulk_load(self.backend, files, offsets, scope, progress)
        if recorded is not None:
            recorded()
        self.resume_bulk_load()

    @property
    def bulk_load_pending(self) -> bool:
        """Whether a recorded bulk load is not finished (its files must stay until it is)."""
        return self.backend.get(META_STORE, BULK_LOAD_KEY) is not None

    def resume_bulk_load(self) -> None:
        """Finish a recorded bulk load: ingest its files, then write its offsets."""
        finished = finish_bulk_load(self.backend, self.path)
        if finished is not None and finished[0] is None:
            self._offsets.update(finished[1])

    # -- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the database and release its directory."""
        self.backend.close()
        if self._lock is not None:
            self._lock.release()

    def __enter__(self) -> ProcessorDatabase:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- internals -------------------------------------------------------------------------

    def _codec(self, store: str) -> Codec[Any]:
        try:
            return self._codecs[store]
        except KeyError:
            raise StateStoreError(
                f"no store named {store!r}; stores: {self.store_names()}"
            ) from None

    def _read_offsets(self) -> dict[tuple[str, int], int]:
        return {
            parse_offset_key(key): int(value)
            for key, value in self.backend.scan(
                META_STORE, OFFSET_PREFIX, prefix_end(OFFSET_PREFIX)
            )
        }
