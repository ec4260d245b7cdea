"""The index of keys with something due (``statestore.due_index``): it follows every write,
staged batches, and what it cannot follow (range deletes, ingests, dropped staged batches)
makes it read the store again; ``StateBatch.due_keys`` adds the batch's own writes. Checked
against a model of the store over RocksDB, and never missing a due key."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rebalance.key_ranges import bucket_range
from statestore import DatabaseIdentity, ProcessorDatabase, SstRunWriter, StateBatch, StoreSpec
from statestore.codec import RawBytes, RawCodec
from statestore.due_index import DUE_STORE, NEVER, DueIndex, decode_due, encode_due

IDENTITY = DatabaseIdentity("due-index", 0, {"initial_processors": 2})
STORES = [StoreSpec(DUE_STORE, RawBytes), StoreSpec("other")]
KEYS = [f"key-{i}".encode() for i in range(8)]
Due = tuple[int, int]


def test_the_stored_form() -> None:
    assert encode_due(5, NEVER) == b"\x00" * 7 + b"\x05\x7f" + b"\xff" * 7
    assert decode_due(encode_due(-3, 9)) == (-3, 9)
    assert decode_due(b"{}") == (NEVER, NEVER)  # damaged: never due, nothing triggered


def test_the_index_reads_the_store_once_then_follows_changes() -> None:
    store = {b"a": encode_due(10, NEVER), b"b": encode_due(NEVER, 5)}
    loads = []

    def load() -> Iterator[tuple[bytes, bytes | None]]:
        loads.append(1)
        return iter(list(store.items()))

    index = DueIndex(load)
    index.changed([(b"c", encode_due(1, 1))])  # before the first read: nothing to follow
    store[b"c"] = encode_due(1, 1)
    assert index.due(10, 4) == [b"a", b"c"]
    assert index.due(9, 5) == [b"b", b"c"]
    index.changed([(b"a", None), (b"d", encode_due(0, NEVER))])
    assert index.due(100, 100) == [b"b", b"c", b"d"]
    assert len(loads) == 1
    index.invalidate()
    assert index.due(100, 100) == [b"a", b"b", b"c"]
    assert len(loads) == 2


def _open(directory: Path) -> ProcessorDatabase:
    return ProcessorDatabase.open(directory / "processor-0", IDENTITY, STORES)


def _write(batch: StateBatch, key: bytes, due: Due | None) -> None:
    if due is None:
        batch.store(DUE_STORE).delete(key)
    else:
        batch.store(DUE_STORE).set(key, encode_due(*due))


def test_due_keys_over_rocksdb_writes_staged_batches_and_range_deletes(tmp_path: Path) -> None:
    with _open(tmp_path) as database:
        batch = database.begin()
        _write(batch, b"a", (10, NEVER))
        _write(batch, b"b", (NEVER, 20))
        assert batch.due_keys(10, 19) == [b"a"]  # the batch's own writes
        batch.commit()
        assert database.begin().due_keys(100, 100) == sorted(
            [b"a", b"b"], key=database.layout.stored
        )
        staged = database.begin()
        _write(staged, b"a", None)
        _write(staged, b"c", (5, 5))
        staged.seal()
        later = database.begin()
        assert set(later.due_keys(100, 100)) == {b"b", b"c"}  # the staged batch's, read
        _write(later, b"b", (50, NEVER))
        assert set(later.due_keys(40, 40)) == {b"c"}  # its own write over the stored one
        later.abort()
        database.backend.discard_staged()
        assert set(database.begin().due_keys(100, 100)) == {b"a", b"b"}
        staged = database.begin()
        _write(staged, b"d", (1, NEVER))
        staged.seal()
        staged.commit()
        assert set(database.begin().due_keys(1, 1)) == {b"d"}
        low, high = bucket_range(0, 2, 2)
        gone = {key for key in (b"a", b"b", b"d") if low <= database.layout.stored(key) < high}
        database.delete_ranges(2, [(low, high)])
        assert set(database.begin().due_keys(100, 100)) == {b"a", b"b", b"d"} - gone
    with _open(tmp_path) as reopened:
        assert set(reopened.begin().due_keys(100, 100)) == {b"a", b"b", b"d"} - gone


def test_ingested_due_times_are_read(tmp_path: Path) -> None:
    with _open(tmp_path) as database:
        assert database.begin().due_keys(NEVER - 1, NEVER - 1) == []
        layout = database.layout
        writer = SstRunWriter(tmp_path / "sst", RawCodec(), layout=layout)
        files = writer.write(layout.sorted_items([(b"x", encode_due(3, NEVER))]))
        database.bulk_load({DUE_STORE: files}, {("in", 0): 1})
        assert database.begin().due_keys(3, 0) == [b"x"]


# -- against a model ---------------------------------------------------------------------------

Op = tuple[Any, ...]
dues = st.one_of(
    st.none(),
    st.tuples(st.sampled_from([0, 10, 20, NEVER]), st.sampled_from([0, 10, 20, NEVER])),
)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.sampled_from(KEYS), dues),
        st.tuples(st.just("stage"), st.lists(st.tuples(st.sampled_from(KEYS), dues), max_size=3)),
        st.tuples(st.just("commit")),
        st.tuples(st.just("discard")),
        st.tuples(st.just("purge"), st.integers(0, 3)),
        st.tuples(st.just("delete_keys"), st.sampled_from(KEYS)),
        st.tuples(st.just("ingest"), st.sampled_from(KEYS), st.tuples(st.just(10), st.just(0))),
        st.tuples(st.just("query"), st.sampled_from(KEYS), dues),
    ),
    max_size=25,
)


class _Model:
    """What readers of the due store see: committed values, then staged batches in order."""

    def __init__(self) -> None:
        self.committed: dict[bytes, Due] = {}
        self.staged: list[tuple[StateBatch, dict[bytes, Due | None]]] = []

    def view(self) -> dict[bytes, Due]:
        seen = dict(self.committed)
        for _batch, changes in self.staged:
            for key, due in changes.items():
                if due is None:
                    seen.pop(key, None)
                else:
                    seen[key] = due
        return seen

    def apply(self, changes: dict[bytes, Due | None]) -> None:
        for key, due in changes.items():
            if due is None:
                self.committed.pop(key, None)
            else:
                self.committed[key] = due

    def drop(self, gone: Callable[[bytes], bool]) -> None:
        self.committed = {k: v for k, v in self.committed.items() if not gone(k)}


def _run(database: ProcessorDatabase, model: _Model, op: Op, directory: Path) -> None:
    kind, stored = op[0], database.layout.stored
    busy = bool(model.staged)  # writes other than staged batches wait until none is
    if kind == "write" and not busy:
        batch = database.begin()
        _write(batch, op[1], op[2])
        batch.commit()
        model.apply({op[1]: op[2]})
    elif kind == "stage":
        batch = database.begin()
        changes = dict(op[1])
        for key, due in changes.items():
            _write(batch, key, due)
        batch.seal()
        model.staged.append((batch, changes))
    elif kind == "commit" and busy:
        batch, changes = model.staged.pop(0)
        batch.commit()
        model.apply(changes)
    elif kind == "discard":
        database.backend.discard_staged()
        model.staged.clear()
    elif kind == "purge" and not busy:
        low, high = bucket_range(op[1], 2, 4)
        database.delete_ranges(2, [(low, high)])
        model.drop(lambda key: low <= stored(key) < high)
    elif kind == "delete_keys" and not busy:
        database.delete_keys(lambda key: key == op[1])
        model.drop(lambda key: key == op[1])
    elif kind == "ingest" and not busy:
        writer = SstRunWriter(directory / f"sst-{id(op)}", RawCodec(), layout=database.layout)
        files = writer.write([(op[1], encode_due(*op[2]))])
        database.bulk_load({DUE_STORE: files}, {("in", 0): 1})
        model.committed[op[1]] = op[2]
    elif kind == "query":
        batch = database.begin()
        _write(batch, op[1], op[2])
        expected = model.view()
        if op[2] is None:
            expected.pop(op[1], None)
        else:
            expected[op[1]] = op[2]
        for event, wall in [(0, 0), (10, -1), (-1, 20), (NEVER - 1, NEVER - 1)]:
            due = [k for k, (e, w) in expected.items() if e <= event or w <= wall]
            assert batch.due_keys(event, wall) == sorted(due, key=stored), (event, wall)
        batch.abort()


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ops)
def test_due_keys_are_exactly_the_due_keys_readers_see(ops: list[Op]) -> None:
    with tempfile.TemporaryDirectory(prefix="due-index-") as name, _open(Path(name)) as database:
        model = _Model()
        for op in [*ops, ("query", KEYS[0], None)]:
            _run(database, model, op, Path(name))
            view = model.view()
            assert set(database.begin().due_keys(NEVER - 1, NEVER - 1)) == {
                key for key, (e, w) in view.items() if min(e, w) < NEVER
            }


@pytest.mark.parametrize("size", [0, 15, 17])
def test_a_damaged_value_is_never_due(size: int, tmp_path: Path) -> None:
    with _open(tmp_path) as database:
        batch = database.begin()
        batch.store(DUE_STORE).set(b"bad", b"\x00" * size)
        batch.commit()
        assert database.begin().due_keys(NEVER - 1, NEVER - 1) == []
