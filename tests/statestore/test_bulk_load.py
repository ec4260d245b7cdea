"""Bulk load: SST files ingested into a store together with the offsets they cover."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from statestore import (
    META_STORE,
    JsonCodec,
    ProcessorDatabase,
    SstRunWriter,
    StoreCorruptError,
    write_sst_file,
)
from statestore.key_layout import KeyLayout
from statestore.layout import BULK_LOAD_KEY
from tests.statestore.conftest import IDENTITY, STORES, open_database

LAYOUT = KeyLayout(int(IDENTITY.fixed["initial_processors"]))
BOTH = pytest.mark.parametrize("database", ["rocksdb", "memory"], indirect=True)


def test_one_million_keys_load_and_read_back(tmp_path: Path) -> None:
    keys = 1_000_000
    writer = SstRunWriter(tmp_path / "sst", max_items=400_000, layout=LAYOUT)
    files = writer.write(LAYOUT.sorted_items((f"key-{i:08d}".encode(), i) for i in range(keys)))
    assert len(files) == 3
    database = open_database("rocksdb", tmp_path)
    try:
        database.bulk_load({"counts": files}, {("words", 0): 1234, ("words", 1): 99})
        assert database.offsets() == {("words", 0): 1234, ("words", 1): 99}
        count = 0
        for count, (key, value) in enumerate(database.items("counts"), start=1):  # noqa: B007
            assert key == f"key-{value:08d}".encode()
        assert count == keys
        assert database.get("counts", b"key-00777777") == 777777
    finally:
        database.close()
    reopened = open_database("rocksdb", tmp_path)  # survives a restart
    try:
        assert reopened.get("counts", b"key-00999999") == 999999
        assert reopened.offsets()[("words", 0)] == 1234
    finally:
        reopened.close()


@BOTH
def test_ingest_over_existing_data_rules(database: ProcessorDatabase, tmp_path: Path) -> None:
    """Ingested keys win over existing ones; other keys stay; later batches win over ingested."""
    batch = database.begin()
    for key, value in [(b"a", "old-a"), (b"b", "old-b"), (b"z", "old-z")]:
        batch.store("counts").set(key, value)
    batch.set_offset("words", 0, 10)
    batch.commit()

    files = SstRunWriter(tmp_path / "run", layout=LAYOUT).write(
        LAYOUT.sorted_items([(b"b", "new-b"), (b"c", "new-c")])
    )
    database.bulk_load({"counts": files}, {("words", 0): 50})
    assert dict(database.items("counts")) == {
        b"a": "old-a",
        b"b": "new-b",
        b"c": "new-c",
        b"z": "old-z",
    }
    assert database.offsets() == {("words", 0): 50}

    after = database.begin()
    after.store("counts").set(b"c", "batch-c")
    after.commit()
    assert database.get("counts", b"c") == "batch-c"


def test_unsorted_runs_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="strictly increasing"):
        write_sst_file(tmp_path / "x.sst", [(b"b", b"1"), (b"a", b"2")])
    with pytest.raises(ValueError, match="strictly increasing"):
        SstRunWriter(tmp_path / "dup", layout=LAYOUT).write([(b"a", 1), (b"a", 2)])
    with pytest.raises(ValueError, match="strictly increasing"):  # in user order, not stored
        SstRunWriter(tmp_path / "user-order", layout=LAYOUT).write(
            sorted(LAYOUT.sorted_items([(b"a", 1), (b"b", 2)]), reverse=True)
        )


def test_interrupted_bulk_load_finishes_on_open(tmp_path: Path) -> None:
    """A crash after the plan was recorded (files not yet ingested) is finished next open."""
    files = SstRunWriter(tmp_path / "run", layout=LAYOUT).write(
        LAYOUT.sorted_items([(b"k1", 1), (b"k2", 2)])
    )
    database = open_database("rocksdb", tmp_path)
    plan = {"files": {"counts": [str(f) for f in files]}, "offsets": [["words", 0, 77]]}
    database.backend.write({META_STORE: [(BULK_LOAD_KEY, json.dumps(plan).encode())]})
    database.close()  # as if the process died here

    reopened = open_database("rocksdb", tmp_path)
    try:
        assert reopened.offsets() == {("words", 0): 77}
        assert dict(reopened.items("counts")) == {b"k1": 1, b"k2": 2}
        assert reopened.backend.get(META_STORE, BULK_LOAD_KEY) is None
    finally:
        reopened.close()


class _DiedError(Exception):
    pass


def test_progress_values_are_recorded_with_the_offsets_even_after_a_crash(
    tmp_path: Path,
) -> None:
    """(A canonical app's marks at the built offsets: never the offsets without them.)"""
    files = SstRunWriter(tmp_path / "run", layout=LAYOUT).write(LAYOUT.sorted_items([(b"k", 1)]))
    database = open_database("rocksdb", tmp_path)

    def die() -> None:
        raise _DiedError

    marks = {("words", 0): -5, ("words", 1): 1_700_000_000_000}
    with pytest.raises(_DiedError):
        database.bulk_load(
            {"counts": files}, {("words", 0): 7}, recorded=die, progress={"m": marks}
        )
    assert database.offsets() == {} and database.progress("m") == {}
    database.close()  # as if the process died here
    reopened = open_database("rocksdb", tmp_path)
    try:
        assert reopened.offsets() == {("words", 0): 7}
        assert reopened.progress("m") == marks
        assert dict(reopened.items("counts")) == {b"k": 1}
    finally:
        reopened.close()


def test_interrupted_bulk_load_without_files_is_a_clear_error(tmp_path: Path) -> None:
    database = open_database("rocksdb", tmp_path)
    plan = {"files": {"counts": [str(tmp_path / "gone.sst")]}, "offsets": []}
    database.backend.write({META_STORE: [(BULK_LOAD_KEY, json.dumps(plan).encode())]})
    database.close()
    with pytest.raises(StoreCorruptError, match="needs files that are gone"):
        ProcessorDatabase.open(tmp_path / "processor-0", IDENTITY, STORES)


def test_codec_bytes_match_batch_bytes(tmp_path: Path) -> None:
    """Values written by an SST run read back exactly like values written by a batch."""
    database = open_database("rocksdb", tmp_path)
    try:
        batch = database.begin()
        batch.store("counts").set(b"via-batch", {"n": 1, "w": "é"})
        batch.commit()
        writer = SstRunWriter(tmp_path / "r", JsonCodec(), layout=LAYOUT)
        files = writer.write([(b"via-sst", {"n": 1, "w": "é"})])
        database.bulk_load({"counts": files}, {})
        assert database.backend.get("counts", LAYOUT.stored(b"via-batch")) == (
            database.backend.get("counts", LAYOUT.stored(b"via-sst"))
        )
    finally:
        database.close()
