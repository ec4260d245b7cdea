"""The batch contract, identical on RocksDB and in memory."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rebalance import bucket, key_hash
from rebalance.key_ranges import bucket_range
from statestore import BatchStateError, BatchStatus, ProcessorDatabase
from tests.statestore.conftest import Account

BOTH = pytest.mark.parametrize("database", ["rocksdb", "memory"], indirect=True)


@BOTH
def test_reads_see_own_writes_and_commit_makes_them_visible(database: ProcessorDatabase) -> None:
    batch = database.begin()
    counts = batch.store("counts")
    assert counts.get(b"apple") is None
    counts.set(b"apple", 1)
    counts.set(b"apple", counts.get(b"apple") + 1)
    assert counts.get(b"apple") == 2
    assert database.get("counts", b"apple") is None  # not committed yet
    batch.set_offset("words", 3, 41)
    batch.commit()
    assert batch.status is BatchStatus.COMMITTED
    assert database.get("counts", b"apple") == 2
    assert database.offsets() == {("words", 3): 41}


@BOTH
def test_abort_drops_everything(database: ProcessorDatabase) -> None:
    batch = database.begin()
    batch.store("counts").set(b"apple", 5)
    batch.set_offset("words", 0, 9)
    batch.abort()
    assert batch.status is BatchStatus.ABORTED
    assert database.get("counts", b"apple") is None
    assert database.offsets() == {}
    with pytest.raises(BatchStateError, match="this state batch is ABORTED"):
        batch.store("counts").get(b"apple")


@BOTH
def test_committed_batch_refuses_more_writes(database: ProcessorDatabase) -> None:
    batch = database.begin()
    view = batch.store("counts")
    batch.commit()
    with pytest.raises(BatchStateError, match="COMMITTED; start a new batch"):
        view.set(b"x", 1)


@BOTH
def test_delete_and_key_scoped_state(database: ProcessorDatabase) -> None:
    first = database.begin()
    first.store("counts").set(b"a", {"n": 1, "last": "x"})
    first.store("counts").set(b"b", {"n": 7})
    first.commit()
    second = database.begin()
    state = second.store("counts").key(b"a")
    assert state.key == b"a"
    assert state.get_field("n") == 1
    state.set_field("n", 2)
    assert state.get() == {"n": 2, "last": "x"}
    second.store("counts").key(b"b").delete()
    assert second.store("counts").get(b"b", "gone") == "gone"
    second.commit()
    assert database.get("counts", b"a") == {"n": 2, "last": "x"}
    assert database.get("counts", b"b") is None


@BOTH
def test_typed_store_round_trips_models(database: ProcessorDatabase) -> None:
    batch = database.begin()
    accounts = batch.store("accounts")
    accounts.set(b"acc-1", Account(owner="ada", balance=10))
    batch.commit()
    loaded = database.get("accounts", b"acc-1")
    assert isinstance(loaded, Account)
    assert loaded == Account(owner="ada", balance=10)
    again = database.begin()
    assert again.store("accounts").key(b"acc-1").get_field("balance") == 10
    again.abort()


@BOTH
def test_typed_store_validates_on_write(database: ProcessorDatabase) -> None:
    batch = database.begin()
    with pytest.raises(ValidationError, match="owner"):
        batch.store("accounts").set(b"bad", {"balance": 3})
    batch.store("accounts").set(b"good", {"owner": "bo"})  # a dict that validates is converted
    assert batch.store("accounts").get(b"good") == Account(owner="bo")
    batch.commit()
    assert database.get("accounts", b"bad") is None


@BOTH
def test_keys_are_stored_by_bucket_and_each_bucket_is_one_range(
    database: ProcessorDatabase,
) -> None:
    """Users see plain keys; the stored order groups them by linear-hash bucket, so the keys
    of any bucket at any processor count are one range (``items(within=...)``)."""
    initial = database.layout.initial
    batch = database.begin()
    for i in range(200):
        batch.store("counts").set(f"k{i:03d}".encode(), i)
    batch.commit()
    keys = [k for k, _ in database.items("counts")]
    assert sorted(keys) == [f"k{i:03d}".encode() for i in range(200)]
    assert keys == sorted(keys, key=database.layout.stored)
    for count in (initial, initial + 1, 3 * initial):
        for j in range(count):
            inside = {k for k, _ in database.items("counts", bucket_range(j, initial, count))}
            assert inside == {k for k in keys if bucket(key_hash(k), initial, count) == j}
            assert all(database.get("counts", k) == int(k[1:]) for k in inside)


@BOTH
def test_unknown_store_is_named(database: ProcessorDatabase) -> None:
    with pytest.raises(BatchStateError, match=r"no store named 'nope'; declared stores"):
        database.begin().store("nope")


@BOTH
def test_offsets_accumulate_across_batches(database: ProcessorDatabase) -> None:
    for offset in (5, 9):
        batch = database.begin()
        batch.set_offset("words", 0, offset)
        batch.commit()
    batch = database.begin()
    batch.set_offset("words", 1, 3)
    batch.commit()
    assert database.offsets() == {("words", 0): 9, ("words", 1): 3}


@BOTH
def test_progress_offsets_flags_and_key_deletion(database: ProcessorDatabase) -> None:
    batch = database.begin()
    for i in range(30):
        batch.store("counts").set(f"k{i:02d}".encode(), i)
    batch.set_offset("words", 0, 30)
    batch.set_progress("catchup-1", "words", 2, 17)
    batch.set_flag("catchup-1-cleared")
    batch.commit()
    assert database.offsets() == {("words", 0): 30}
    assert database.progress("catchup-1") == {("words", 2): 17}
    assert database.progress("catchup-2") == {}
    assert database.has_flag("catchup-1-cleared")
    assert not database.has_flag("other")

    deleted = database.delete_keys(lambda key: int(key[1:]) % 3 == 0, chunk=4)
    assert deleted == 10
    assert sorted(int(k[1:]) for k, _ in database.items("counts")) == [
        i for i in range(30) if i % 3
    ]
    done = database.begin()
    done.clear_progress("catchup-1", "words", 2)
    done.commit()
    assert database.progress("catchup-1") == {}


@BOTH
@pytest.mark.parametrize("sealed", [False, True])
def test_the_last_progress_set_or_cleared_in_a_batch_is_what_it_writes(
    database: ProcessorDatabase, sealed: bool
) -> None:
    """``set_progress`` is kept as a number and encoded once, at the seal or commit: what a
    batch writes is still its last ``set_progress`` or ``clear_progress`` of each partition
    and scope, as when each was written at once."""
    first = database.begin()
    first.set_progress("time-floor", "words", 0, 5)
    first.set_progress("time-floor", "words", 1, 6)
    first.set_progress("catchup-1", "words", 0, 7)
    first.commit()
    batch = database.begin()
    for floor in range(10, 20):  # (a floor rising record by record)
        batch.set_progress("time-floor", "words", 0, floor)
    batch.clear_progress("time-floor", "words", 1)
    batch.set_progress("time-floor", "words", 2, 3)
    batch.clear_progress("time-floor", "words", 2)
    batch.clear_progress("catchup-1", "words", 0)
    batch.set_progress("catchup-1", "words", 0, 8)  # (set again after a clear: the set)
    dropped = database.begin() if not sealed else None
    if sealed:
        batch.seal()
    batch.commit()
    assert database.progress("time-floor") == {("words", 0): 19}
    assert database.progress("catchup-1") == {("words", 0): 8}
    if dropped is not None:
        dropped.set_progress("time-floor", "words", 0, 99)
        dropped.abort()
    assert database.progress("time-floor") == {("words", 0): 19}


@BOTH
def test_reads_are_copies_and_rollback_restores_what_the_batch_held(
    database: ProcessorDatabase,
) -> None:
    batch = database.begin()
    counts = batch.store("counts")
    value = {"seen": [1]}
    counts.set(b"k", value)
    value["seen"].append(2)  # after set: not stored
    read = counts.get(b"k")
    read["seen"].append(3)  # a read's copy: not stored
    assert counts.get(b"k") == {"seen": [1]}
    saved = counts.savepoint(b"k")
    again = counts.get(b"k")
    again["seen"].append(4)
    counts.set(b"k", again)
    again["seen"].append(5)
    counts.rollback(b"k", saved)
    assert counts.get(b"k") == {"seen": [1]}
    accounts = batch.store("accounts")
    accounts.set(b"acc", Account(owner="ada"))
    accounts.get(b"acc").balance = 99
    assert accounts.get(b"acc") == Account(owner="ada")
    batch.commit()
    assert database.get("counts", b"k") == {"seen": [1]}
    assert database.get("accounts", b"acc") == Account(owner="ada")


@BOTH
def test_a_value_that_cannot_be_stored_fails_at_set(database: ProcessorDatabase) -> None:
    batch = database.begin()
    counts = batch.store("counts")
    counts.set(b"k", 1)
    with pytest.raises(TypeError, match=r"store 'counts' cannot hold this set value.*Fix:"):
        counts.set(b"k", {1, 2})
    assert counts.get(b"k") == 1
    batch.commit()
    assert database.get("counts", b"k") == 1


@BOTH
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
def test_a_typed_value_that_would_not_read_back_is_refused_at_set(
    database: ProcessorDatabase,
) -> None:
    """A model whose field was mutated to the wrong type (pydantic does not validate on
    assignment) would be stored, then fail every later read of the key."""
    batch = database.begin()
    accounts = batch.store("accounts")
    account = Account(owner="ada", balance=10)
    account.balance = 1.5  # type: ignore[assignment]  # what a careless function does
    with pytest.raises(ValueError, match="does not read back"):
        accounts.set(b"acc-1", account)
    assert accounts.get(b"acc-1") is None  # nothing was kept
    batch.commit()
    assert database.get("accounts", b"acc-1") is None
