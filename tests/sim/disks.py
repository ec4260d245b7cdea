"""Processors' state directories in a simulated world: they outlive a killed process.

By default a directory is an in-memory backend whose stores survive the process (every
write of a batch is atomic, so a kill leaves the last committed batch); a fraction of
schedules use real RocksDB directories under a temporary path. Losing a disk deletes it.

RocksDB compacts in background threads, in real time: whether a compaction ran before a
checkpoint changes its files, so a snapshot's size, so how many batches copying it spans, and
a seed would not replay. ``rocksdb_without_background_compactions`` turns automatic
compactions off (as ``Options.set_disable_auto_compactions``) while a schedule runs, and opens
a database's files on one thread; the stores hold the same data either way.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

import rocksdict

from framework.runtime.loop import DatabaseOpener
from statestore import DatabaseIdentity, ProcessorDatabase, StoreCorruptError, StoreSpec
from statestore.memory import MEMORY_CHECKPOINT, MemoryBackend
from tests.sim.scheduler import Party

__all__ = ["Disks", "KeptBackend", "memory_backed_temp", "rocksdb_without_background_compactions"]

#: A memory-backed file system (tmpfs) most Linux machines mount: RocksDB's opens, closes and
#: checkpoints there cost a tenth of what they cost on a disk (its fsyncs are no-ops).
_MEMORY_FS = Path("/dev/shm")  # noqa: S108 - a parent for private mkdtemp directories


class KeptBackend(MemoryBackend):
    """An in-memory backend over stores someone else keeps (``close`` keeps them)."""

    def __init__(self, stores: dict[str, dict[bytes, bytes]]) -> None:
        super().__init__()
        self._stores = stores

    def close(self) -> None:
        """Refuse further use; the stores stay."""
        self._closed = True


class Disks:
    """Every processor's state directory of one world."""

    def __init__(self, root: Path, rocksdb: bool) -> None:
        self.root = root
        self.rocksdb = rocksdb
        self._memory: dict[Path, dict[str, dict[bytes, bytes]]] = {}
        self._identities: dict[Path, DatabaseIdentity] = {}

    def opener(self, party: Party) -> DatabaseOpener:
        """How ``party`` opens its database (closed for it when it is killed)."""

        def open_database(
            path: Path, identity: DatabaseIdentity, stores: Sequence[StoreSpec]
        ) -> ProcessorDatabase:
            self._identities[path] = identity
            if self.rocksdb:
                database = ProcessorDatabase.open(path, identity, stores)
                party.on_kill.append(lambda: _close_quietly(database))
                return database
            if not self._memory.get(path) and (path / MEMORY_CHECKPOINT).exists():
                # restored from a snapshot: the directory holds the stores as JSON
                restored = MemoryBackend.load(path)
                self._memory[path] = {n: dict(restored.scan(n)) for n in restored.store_names()}
                shutil.rmtree(path)
            disk = self._memory.setdefault(path, {})
            return ProcessorDatabase.in_memory(identity, stores, KeptBackend(disk), path)

        return open_database

    def holds(self, path: Path) -> bool:
        """Whether the state directory at ``path`` holds anything (else a run may restore
        it from a snapshot)."""
        if self.rocksdb:
            return path.exists() and any(path.iterdir())
        return bool(self._memory.get(path)) or (path / MEMORY_CHECKPOINT).exists()

    def read(self, path: Path) -> ProcessorDatabase | None:
        """The database at ``path`` for reading (``None`` when there is none)."""
        if self.rocksdb:
            if not (path / "CURRENT").exists():
                return None
            for _attempt in range(4):  # a live writer may delete a file the open just listed
                with contextlib.suppress(StoreCorruptError):
                    return ProcessorDatabase.open_read_only(path)
            return ProcessorDatabase.open_read_only(path)
        disk = self._memory.get(path)
        if not disk:
            return None
        identity = self._identities[path]  # the one it was created with (checked on open)
        return ProcessorDatabase.in_memory(identity, [StoreSpec("folds")], KeptBackend(disk), path)

    def lose(self, path: Path) -> None:
        """The directory is gone (a lost disk)."""
        self._memory.pop(path, None)
        shutil.rmtree(path, ignore_errors=True)


def memory_backed_temp() -> str | None:
    """Where a schedule's directories go (its state directories, RocksDB's scratch ones): a
    memory-backed file system when the machine has a writable one, else ``None`` (the usual
    temporary directory). The files are the same either way, only faster to sync."""
    if _MEMORY_FS.is_dir() and os.access(_MEMORY_FS, os.W_OK | os.X_OK):
        return str(_MEMORY_FS)
    return None


def _close_quietly(database: ProcessorDatabase) -> None:
    with contextlib.suppress(Exception):
        database.close()


def _options_without_compactions(*args: Any, **kwargs: Any) -> rocksdict.Options:
    options = rocksdict.Options(*args, **kwargs)
    options.set_disable_auto_compactions(True)
    # a schedule opens its few-file databases dozens of times: one thread opens their files
    # (RocksDB's default starts 16 at each open, a quarter of an open's CPU here)
    options.set_max_file_opening_threads(1)
    return options


@contextlib.contextmanager
def rocksdb_without_background_compactions() -> Iterator[None]:
    """Every RocksDB database, column family and SST writer made meanwhile has no automatic
    compactions (see the module)."""
    with mock.patch("statestore.rocks.Options", _options_without_compactions):
        yield
