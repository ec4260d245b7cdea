"""Key purges: a scale's moved keys deleted by range, once, surviving a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from rebalance import bucket, key_hash
from rebalance.key_ranges import handoff_ranges
from statestore import KeyPurge, ProcessorDatabase, StateStoreError, pending_purges, start_purge
from tests.statestore.conftest import IDENTITY, STORES, Account, open_database

B = int(IDENTITY.fixed["initial_processors"])


def fill(database: ProcessorDatabase, keys: int) -> None:
    batch = database.begin()
    for i in range(keys):
        batch.store("counts").set(f"k{i:05}".encode(), i)
        batch.store("accounts").set(f"k{i:05}".encode(), Account(owner=str(i)))
    batch.commit()


def moved(key: bytes) -> bool:
    """Of a 2 -> 3 scale: the keys processor 0 gives to processor 2."""
    h = key_hash(key)
    return bucket(h, B, 3) == 2 and bucket(h, B, 2) == 0


RANGES = handoff_ranges(B, 2, 3, 2, [0])


@pytest.mark.parametrize("kind", ["memory", "rocksdb"])
def test_a_purge_deletes_exactly_the_moved_keys_from_every_store_once(
    kind: str, tmp_path: Path
) -> None:
    database = open_database(kind, tmp_path)
    fill(database, 1000)
    assert start_purge(database, "moved-1-0-2", {"rule": "2->3"})
    assert not start_purge(database, "moved-1-0-2", {"rule": "2->3"})  # once
    assert pending_purges(database) == {"moved-1-0-2": {"rule": "2->3"}}
    KeyPurge(database, "moved-1-0-2", B, RANGES).step()
    expected = {f"k{i:05}".encode() for i in range(1000)}
    expected = {key for key in expected if not moved(key)}
    assert 200 < 1000 - len(expected) < 300  # a quarter of the keys moved
    for store in ("counts", "accounts"):
        assert {key for key, _ in database.items(store)} == expected
    assert pending_purges(database) == {}
    assert not start_purge(database, "moved-1-0-2", {"rule": "2->3"})  # done stays done
    batch = database.begin()  # a key written again after the purge is kept (a later owner's)
    batch.store("counts").set(b"k00000", 7)
    batch.commit()
    KeyPurge(database, "moved-1-0-2", B, RANGES).step()  # done: deletes nothing again
    assert database.get("counts", b"k00000") == 7
    database.close()


def test_a_crash_before_the_purge_ran_runs_it_on_restart(tmp_path: Path) -> None:
    database = open_database("rocksdb", tmp_path)
    fill(database, 3000)
    start_purge(database, "aborted-2-1", {"sources": [0]})
    database.close()  # the process dies before the purge's write
    database = ProcessorDatabase.open(tmp_path / "processor-0", IDENTITY, STORES)
    assert pending_purges(database) == {"aborted-2-1": {"sources": [0]}}
    assert KeyPurge(database, "aborted-2-1", B, RANGES).step()
    for store in ("counts", "accounts"):
        assert not any(moved(key) for key, _ in database.items(store))
        assert sum(1 for _ in database.items(store)) == sum(
            1 for i in range(3000) if not moved(f"k{i:05}".encode())
        )
    database.close()


def test_ranges_of_another_key_order_are_refused(tmp_path: Path) -> None:
    database = open_database("memory", tmp_path)
    fill(database, 10)
    start_purge(database, "moved-1-0-2", {})
    with pytest.raises(StateStoreError, match="ordered for 2"):
        KeyPurge(database, "moved-1-0-2", 1, handoff_ranges(1, 1, 2, 1, [0])).step()
    assert sum(1 for _ in database.items("counts")) == 10
