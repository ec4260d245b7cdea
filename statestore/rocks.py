"""The RocksDB backend, through rocksdict: the only module that imports rocksdict.

The database is opened in rocksdict's raw mode, so keys and values are stored as the exact
bytes splitstate gives (no rocksdict type prefix) and other RocksDB tools can read them.
Each store is a column family.

A reader (``read_only``: ``status``, the tools) opens the database as a RocksDB *secondary
instance*, RocksDB's way to read a database that its owner keeps writing: a plain read-only
open fails now and then with "Corruption: ... No such file" when the owner's flush or
compaction deletes a file between the reader's reading of the MANIFEST and its opening of
the file. A secondary keeps every file it uses open (``max_open_files`` -1), so files the
owner deletes later stay readable, and its own info log goes to a directory of its own.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from operator import itemgetter
from pathlib import Path

from rocksdict import (
    AccessType,
    Checkpoint,
    IngestExternalFileOptions,
    Options,
    Rdict,
    SstFileWriter,
    WriteBatch,
    WriteOptions,
)

from statestore.backend import Changes, RangeDeletes
from statestore.errors import StateStoreError, StoreCorruptError

__all__ = ["RocksBackend", "check_order", "read_sst_files", "write_sst_file"]

DEFAULT_STORE = "default"
_KEY = itemgetter(0)
#: opens of a reader before an error stands (a file the owner deleted meanwhile)
_READER_ATTEMPTS = 5
_READER_RETRY_SECONDS = 0.05


#: each column family's memtable size (RocksDB's default is 64 MiB): a processor overwrites
#: the same keys batch after batch (the value cache serves most reads), and inserting into a
#: memtable holding hundreds of thousands of versions of them costs about twice the CPU of an
#: 8 MiB one's (a larger skip list to insert into: ~4 vs ~2 us per record of 2,000-record
#: batches over 10,000 keys, time and due stores). Kafka Streams' stores use 16 MiB.
WRITE_BUFFER_BYTES = 8 << 20


def _family_options() -> Options:
    """The options of a column family (a store)."""
    options = Options(raw_mode=True)
    options.set_write_buffer_size(WRITE_BUFFER_BYTES)
    return options


def _options() -> Options:
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.create_missing_column_families(True)
    return options


class RocksBackend:
    """Named stores as column families of one RocksDB database."""

    def __init__(self, path: Path, read_only: bool = False, fsync: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        self._reader_dir: Path | None = None
        if read_only:
            self._db, families = self._open_reader(path)
        else:
            try:
                self._db, families = _open(path, _options(), AccessType.read_write())
            except Exception as error:
                raise _open_error(path, error) from error
        self._families: dict[str, Rdict] = {
            name: self._db.get_column_family(name) for name in families
        }
        self._write_options = WriteOptions()
        self._write_options.sync = fsync

    def _open_reader(self, path: Path) -> tuple[Rdict, dict[str, Options]]:
        """Open ``path`` as a secondary instance (its info log in a directory of its own),
        trying again a few times when the owner deleted a file meanwhile."""
        self._reader_dir = Path(tempfile.mkdtemp(prefix="splitstate-reader-"))
        options = _options()
        options.create_if_missing(False)
        options.set_max_open_files(-1)  # RocksDB requires it of a secondary instance
        access = AccessType.secondary(str(self._reader_dir))
        for attempt in range(1, _READER_ATTEMPTS + 1):
            try:
                return _open(path, options, access)
            except Exception as error:
                if attempt == _READER_ATTEMPTS or not (path / "CURRENT").exists():
                    shutil.rmtree(self._reader_dir, ignore_errors=True)
                    raise _open_error(path, error) from error
                time.sleep(_READER_RETRY_SECONDS * attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def store_names(self) -> list[str]:
        """The column families other than RocksDB's default one."""
        return sorted(self._families)

    def create_store(self, name: str) -> None:
        """Create the column family ``name`` if missing."""
        if name not in self._families:
            if self.read_only:
                raise StateStoreError(f"store {name!r} does not exist in {self.path}")
            self._families[name] = self._db.create_column_family(name, _family_options())

    def _family(self, store: str) -> Rdict:
        try:
            return self._families[store]
        except KeyError:
            raise StateStoreError(
                f"store {store!r} does not exist in {self.path}; stores: {self.store_names()}"
            ) from None

    def get(self, store: str, key: bytes) -> bytes | None:
        """The raw value of ``key``."""
        value = self._family(store).get(key)
        return None if value is None else bytes(value)

    def reader(self, store: str) -> Callable[[bytes], bytes | None]:
        """The column family's own ``get`` (raw mode returns bytes or ``None``)."""
        getter: Callable[[bytes], bytes | None] = self._family(store).get
        return getter

    def write(self, changes: Changes, ranges: RangeDeletes | None = None) -> None:
        """One RocksDB WriteBatch for all stores: atomic, also across column families.
        ``ranges`` become range tombstones (``DeleteRange``), written before ``changes``."""
        batch = WriteBatch(raw_mode=True)
        for store, spans in (ranges or {}).items():
            self._family(store)
            handle = self._db.get_column_family_handle(store)
            for low, high in spans:
                batch.delete_range(low, high, handle)
        for store, items in changes.items():
            self._family(store)
            handle = self._db.get_column_family_handle(store)
            put, delete = batch.put, batch.delete
            # in key order (stable: of a key written twice, the last write still wins): a
            # memtable inserts a run of ascending keys for less CPU than the same keys unsorted
            for key, value in sorted(items, key=_KEY):
                if value is None:
                    delete(key, handle)
                else:
                    put(key, value, handle)
        self._db.write(batch, self._write_options)

    def scan(
        self, store: str, start: bytes | None = None, end: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """Items in key order from ``start`` up to (not including) ``end``."""
        for key, value in self._family(store).items(from_key=start):
            raw_key = _as_bytes(key)
            if end is not None and raw_key >= end:
                return
            yield raw_key, _as_bytes(value)

    def ingest(self, store: str, files: Sequence[Path]) -> None:
        """Ingest SST files (copied, so the originals stay for a retry)."""
        options = IngestExternalFileOptions()
        options.set_move_files(False)
        self._family(store).ingest_external_file([str(f) for f in files], options)

    def checkpoint(self, path: Path) -> None:
        """A RocksDB checkpoint (hard links where possible) of the whole database."""
        Checkpoint(self._db).create_checkpoint(str(path))

    def approximate_size(self) -> int:
        """Bytes of the database's files on disk (a file RocksDB deletes meanwhile, as a
        compaction does, is left out)."""
        total = 0
        for file in self.path.iterdir():
            try:
                if file.is_file():
                    total += file.stat().st_size
            except FileNotFoundError:
                continue
        return total

    def close(self) -> None:
        """Flush nothing extra (the WAL holds every write) and close."""
        for family in self._families.values():
            family.close()
        self._db.close()
        if self._reader_dir is not None:
            shutil.rmtree(self._reader_dir, ignore_errors=True)


def _open(path: Path, options: Options, access: AccessType) -> tuple[Rdict, dict[str, Options]]:
    """The database at ``path`` with every column family it has."""
    existing = Rdict.list_cf(str(path), options) if (path / "CURRENT").exists() else []
    families = {name: _family_options() for name in existing if name != DEFAULT_STORE}
    return Rdict(str(path), options, column_families=families, access_type=access), families


def _as_bytes(value: object) -> bytes:
    """Raw-mode rocksdict yields bytes; anything else means the database is not raw."""
    if not isinstance(value, bytes):
        raise StoreCorruptError(f"expected raw bytes from RocksDB, got {type(value).__name__}")
    return value


def _open_error(path: Path, error: Exception) -> StateStoreError:
    text = str(error)
    if "lock" in text.lower():
        return StateStoreError(
            f"RocksDB in {path} is locked by another process ({text}). Fix: stop the "
            "processor that uses it, or point this one at another state directory."
        )
    return StoreCorruptError(
        f"RocksDB could not open {path}: {text}. Nothing was deleted. Fix: restore the "
        "directory from a snapshot, or move it aside so the processor rebuilds its state "
        "from Kafka (replay or Spark bootstrap)."
    )


def check_order(previous: bytes | None, key: bytes) -> None:
    """Raise ``ValueError`` unless ``key`` comes strictly after ``previous``."""
    if previous is not None and key <= previous:
        raise ValueError(
            f"SST keys must be strictly increasing: {key!r} came after {previous!r}. "
            "Fix: sort the run by key and drop duplicate keys before writing it."
        )


def write_sst_file(path: Path, items: Iterable[tuple[bytes, bytes]]) -> int:
    """Write ``items`` (keys strictly increasing) as one SST file; returns the item count.
    The keys are written as given: for a user store, stored keys (``KeyLayout.stored``)."""
    writer = SstFileWriter(Options(raw_mode=True))
    writer.open(str(path))
    count = 0
    previous: bytes | None = None
    for key, value in items:
        check_order(previous, key)
        writer[key] = value
        previous = key
        count += 1
    writer.finish()
    return count


def read_sst_files(files: Sequence[Path]) -> list[tuple[bytes, bytes]]:
    """Every item of ``files``, as RocksDB would see them after ingesting them in order."""
    scratch = Path(tempfile.mkdtemp(prefix="splitstate-sst-read-"))
    try:
        database = Rdict(str(scratch / "db"), _options())
        try:
            options = IngestExternalFileOptions()
            options.set_move_files(False)
            for file in files:
                database.ingest_external_file([str(file)], options)
            return [(_as_bytes(k), _as_bytes(v)) for k, v in database.items()]
        finally:
            database.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
