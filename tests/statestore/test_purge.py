"""Key purges: bounded steps between batches, resumed exactly after a crash (reopen)."""

from __future__ import annotations

from pathlib import Path

from statestore import KeyPurge, ProcessorDatabase, pending_purges, start_purge
from tests.statestore.conftest import IDENTITY, STORES, Account, open_database


def fill(database: ProcessorDatabase, keys: int) -> None:
    batch = database.begin()
    for i in range(keys):
        batch.store("counts").set(f"k{i:05}".encode(), i)
        batch.store("accounts").set(f"k{i:05}".encode(), Account(owner=str(i)))
    batch.commit()


def doomed(key: bytes) -> bool:
    return int(key[1:]) % 3 == 0


def test_steps_are_bounded_and_delete_exactly_the_doomed_keys(tmp_path: Path) -> None:
    database = open_database("memory", tmp_path)
    fill(database, 1000)
    assert start_purge(database, "moved-1-0-2", {"rule": "thirds"})
    assert not start_purge(database, "moved-1-0-2", {"rule": "thirds"})  # once
    purge = KeyPurge(database, "moved-1-0-2", doomed)
    steps = 0
    while not purge.step(budget=100):
        steps += 1
        remaining = sum(1 for _ in database.items("counts")) + sum(
            1 for _ in database.items("accounts")
        )
        assert remaining >= 2000 - 34 * (steps + 1) * 2  # at most a budget's worth per step
    assert steps >= 19  # two stores of 1000 keys, 100 scanned per step
    for store in ("counts", "accounts"):
        left = {key for key, _ in database.items(store)}
        assert left == {f"k{i:05}".encode() for i in range(1000) if i % 3}
    assert purge.deleted == 2 * 334
    assert pending_purges(database) == {}
    assert not start_purge(database, "moved-1-0-2", {"rule": "thirds"})  # done stays done


def test_a_crash_between_steps_resumes_where_it_stopped(tmp_path: Path) -> None:
    database = open_database("rocksdb", tmp_path)
    fill(database, 3000)
    start_purge(database, "aborted-2-1", {"sources": [3]})
    first = KeyPurge(database, "aborted-2-1", doomed)
    for _ in range(7):
        first.step(budget=500)
    database.close()  # the process dies here
    database = ProcessorDatabase.open(tmp_path / "processor-0", IDENTITY, STORES)
    assert pending_purges(database) == {"aborted-2-1": {"sources": [3]}}
    second = KeyPurge(database, "aborted-2-1", doomed)
    second.finish()
    assert first.deleted + second.deleted == 2 * 1000  # nothing deleted or scanned twice
    for store in ("counts", "accounts"):
        assert all(not doomed(key) for key, _ in database.items(store))
        assert sum(1 for _ in database.items(store)) == 2000
    database.close()
