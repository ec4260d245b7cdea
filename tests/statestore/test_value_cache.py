"""The value cache in front of the backend, and staged (sealed, not yet written) batches."""

from __future__ import annotations

import gc
import tracemalloc
import weakref
from pathlib import Path

import pytest

from statestore import (
    BatchStatus,
    DatabaseIdentity,
    ProcessorDatabase,
    StateStoreError,
    StoreSpec,
)
from statestore.memory import MemoryBackend
from statestore.value_cache import CachedBackend


def _database(tmp_path: Path | None = None) -> ProcessorDatabase:
    identity = DatabaseIdentity("cache", 0, {"initial_processors": 2})
    if tmp_path is None:
        return ProcessorDatabase.in_memory(identity, [StoreSpec("s")])
    return ProcessorDatabase.open(tmp_path / "db", identity, [StoreSpec("s")])


@pytest.mark.parametrize("on_disk", [False, True])
def test_a_sealed_batch_is_read_by_later_batches_and_written_only_at_its_commit(
    tmp_path: Path, on_disk: bool
) -> None:
    database = _database(tmp_path if on_disk else None)
    first = database.begin()
    first.store("s").set(b"k", 1)
    first.set_offset("in", 0, 10)
    first.seal()
    assert first.status is BatchStatus.SEALED
    second = database.begin()
    assert second.store("s").get(b"k") == 1  # the sealed batch's write
    second.store("s").set(b"k", 2)
    second.set_offset("in", 0, 20)
    second.seal()
    assert database.get("s", b"k") is None  # nothing written yet
    assert database.offsets() == {}
    with pytest.raises(StateStoreError, match="out of order"):
        second.commit()
    first.commit()
    assert database.get("s", b"k") == 1
    assert database.offsets() == {("in", 0): 10}
    assert database.begin().store("s").get(b"k") == 2  # still the staged newer value
    second.commit()
    assert database.get("s", b"k") == 2
    assert database.offsets() == {("in", 0): 20}
    database.close()


def test_discarding_staged_batches_forgets_their_writes() -> None:
    database = _database()
    kept = database.begin()
    kept.store("s").set(b"k", 1)
    kept.commit()
    dropped = database.begin()
    dropped.store("s").set(b"k", 5)
    dropped.store("s").set(b"new", 1)
    dropped.seal()
    database.backend.discard_staged()
    again = database.begin()
    assert again.store("s").get(b"k") == 1
    assert again.store("s").get(b"new") is None
    assert database.backend.staged == 0


def test_other_writes_are_refused_while_batches_are_staged() -> None:
    database = _database()
    sealed = database.begin()
    sealed.store("s").set(b"k", 1)
    sealed.seal()
    plain = database.begin()
    plain.store("s").set(b"other", 1)
    with pytest.raises(StateStoreError, match="while 1 batches are staged"):
        plain.commit()
    with pytest.raises(StateStoreError, match="while 1 batches are staged"):
        database.backend.write({}, {"s": [(b"\x00", b"\xff")]})
    meta_only = database.begin()
    meta_only.set_flag("allowed")  # metadata is not cached: writing it is fine
    meta_only.commit()
    assert database.has_flag("allowed")


def test_range_deletes_empty_the_stores_cache() -> None:
    database = _database()
    batch = database.begin()
    batch.store("s").set(b"k", 1)
    batch.commit()
    assert database.begin().store("s").get(b"k") == 1  # cached now
    stored = database.layout.stored(b"k")
    database.backend.write({}, {"s": [(stored, stored + b"\x00")]})
    assert database.begin().store("s").get(b"k") is None


def test_eviction_keeps_the_cache_bounded_and_never_drops_staged_values() -> None:
    backend = CachedBackend(MemoryBackend(), max_entries=8)
    backend.create_store("s")
    backend.write({"s": [(bytes([i]), b"v") for i in range(20)]})
    read = backend.reader("s")
    for i in range(20):
        assert read(bytes([i])) == b"v"
    token = backend.stage({"s": [(b"staged", b"1")]})
    for i in range(100, 140):
        read(bytes([i]))  # misses, remembered as missing, evicting older entries
    assert read(b"staged") == b"1"  # still staged: never evicted
    assert len(backend._values["s"]) <= 9
    backend.commit_staged(token, {"s": [(b"staged", b"1")]})
    assert backend.get("s", b"staged") == b"1"


@pytest.mark.parametrize("sealed", [False, True])
def test_a_committed_batch_is_freed_without_the_cycle_collector(sealed: bool) -> None:
    """A batch and its store views refer to each other; a committed batch drops its views, so
    reference counting frees it at once (the runtime runs the cycle collector rarely: batches
    left to it held hundreds of MB in bench/throughput.py)."""
    database = _database()
    batch = database.begin()
    batch.store("s").set(b"k", 1)
    if sealed:
        batch.seal()
    batch.commit()
    gone = weakref.ref(batch)
    gc.disable()
    try:
        del batch
        assert gone() is None
    finally:
        gc.enable()


def test_written_values_are_held_at_their_own_size() -> None:
    """orjson's result keeps its ~4 KiB work buffer: held as such by the value cache (and the
    in-memory backend), 100k cached counts took ~400 MB. Written values are exact copies."""
    database = _database()
    tracemalloc.start()
    try:
        batch = database.begin()
        store = batch.store("s")
        for i in range(2000):
            store.set(f"k{i}".encode(), i)
        batch.commit()
        held, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 2000 * 500  # keys, values and dict slots: a few hundred bytes a key
