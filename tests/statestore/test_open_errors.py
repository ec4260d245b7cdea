"""Opening state: locks, conflicts, damage and snapshots give clear errors or exact copies."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from statestore import (
    DatabaseIdentity,
    ProcessorDatabase,
    StoreConflictError,
    StoreCorruptError,
    StoreLockedError,
)
from statestore.layout import META_KEY, META_STORE
from statestore.rocks import RocksBackend
from tests.statestore.conftest import IDENTITY, STORES

HOLD = """
import sys, time
from pathlib import Path
from statestore import ProcessorDatabase
from tests.statestore.conftest import IDENTITY, STORES
db = ProcessorDatabase.open(Path(sys.argv[1]), IDENTITY, STORES)
print("open", flush=True)
time.sleep(120)
"""

OPEN = """
import sys
from pathlib import Path
from statestore import ProcessorDatabase, StoreLockedError
from tests.statestore.conftest import IDENTITY, STORES
try:
    ProcessorDatabase.open(Path(sys.argv[1]), IDENTITY, STORES)
except StoreLockedError as error:
    print(error)
    sys.exit(3)
"""


def test_second_process_gets_a_clear_error_not_a_hang(tmp_path: Path) -> None:
    directory = tmp_path / "processor-0"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(directory)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "open"
        start = time.monotonic()
        second = subprocess.run(
            [sys.executable, "-c", OPEN, str(directory)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert time.monotonic() - start < 30
        assert second.returncode == 3, second.stderr
        assert f"is in use by process {holder.pid}" in second.stdout
        assert "stop that processor first" in second.stdout
    finally:
        holder.kill()
        holder.wait()
    # The kernel dropped the lock with the killed holder: opening works again.
    ProcessorDatabase.open(directory, IDENTITY, STORES).close()


def test_same_process_cannot_open_twice(tmp_path: Path) -> None:
    with (
        ProcessorDatabase.open(tmp_path / "p", IDENTITY, STORES),
        pytest.raises(StoreLockedError),
    ):
        ProcessorDatabase.open(tmp_path / "p", IDENTITY, STORES)


def test_other_app_or_processor_is_refused(tmp_path: Path) -> None:
    ProcessorDatabase.open(tmp_path / "p", IDENTITY, STORES).close()
    other_app = DatabaseIdentity("another-app", 0, IDENTITY.fixed)
    with pytest.raises(StoreConflictError, match="belongs to app 'test-app' processor 0"):
        ProcessorDatabase.open(tmp_path / "p", other_app, STORES)
    other_processor = DatabaseIdentity("test-app", 1, IDENTITY.fixed)
    with pytest.raises(StoreConflictError, match="not app 'test-app' processor 1"):
        ProcessorDatabase.open(tmp_path / "p", other_processor, STORES)
    changed = DatabaseIdentity("test-app", 0, {"initial_processors": 4, "topics": {"in": 8}})
    with pytest.raises(StoreConflictError, match="can never change"):
        ProcessorDatabase.open(tmp_path / "p", changed, STORES)
    # Refusals change nothing: the original still opens.
    ProcessorDatabase.open(tmp_path / "p", IDENTITY, STORES).close()


def test_foreign_or_half_written_directory_is_kept_and_explained(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("user data")
    with pytest.raises(StoreCorruptError, match=r"no RocksDB database.*Nothing was deleted"):
        ProcessorDatabase.open(foreign, IDENTITY, STORES)
    assert (foreign / "notes.txt").read_text() == "user data"


def test_corrupt_database_is_explained(tmp_path: Path) -> None:
    ProcessorDatabase.open(tmp_path / "p", IDENTITY, STORES).close()
    current = tmp_path / "p" / "CURRENT"
    current.write_text("MANIFEST-999999\n")
    with pytest.raises(StoreCorruptError, match=r"RocksDB could not open.*Nothing was deleted"):
        ProcessorDatabase.open(tmp_path / "p", IDENTITY, STORES)
    assert current.exists()


def test_snapshot_is_a_consistent_openable_copy(tmp_path: Path) -> None:
    with ProcessorDatabase.open(tmp_path / "p", IDENTITY, STORES) as database:
        batch = database.begin()
        batch.store("counts").set(b"a", 1)
        batch.set_offset("words", 0, 5)
        batch.commit()
        snapshot = database.snapshot(tmp_path / "snap" / "processor-0")
        later = database.begin()
        later.store("counts").set(b"a", 2)
        later.set_offset("words", 0, 6)
        later.commit()
        with pytest.raises(Exception, match="already exists"):
            database.snapshot(snapshot)
    with ProcessorDatabase.open(snapshot, IDENTITY, STORES) as copy:
        assert copy.get("counts", b"a") == 1
        assert copy.offsets() == {("words", 0): 5}


def test_read_only_open_works_while_the_owner_runs(tmp_path: Path) -> None:
    with ProcessorDatabase.open(tmp_path / "p", IDENTITY, STORES) as database:
        batch = database.begin()
        batch.store("counts").set(b"a", 1)
        batch.set_offset("words", 0, 5)
        batch.commit()
        reader = ProcessorDatabase.open_read_only(tmp_path / "p")
        try:
            assert reader.get("counts", b"a") == 1
            assert reader.offsets() == {("words", 0): 5}
            assert reader.identity.app_id == "test-app"
        finally:
            reader.close()


def test_a_new_database_stays_fresh_until_checked_even_across_reopens(tmp_path: Path) -> None:
    """The fresh flag (a new or lost directory whose owned partitions no run has checked)
    is written with the database and survives reopening until ``checked_fresh``."""
    path = tmp_path / "processor-0"
    with ProcessorDatabase.open(path, IDENTITY, STORES) as database:
        assert database.created and database.fresh
    with ProcessorDatabase.open(path, IDENTITY, STORES) as database:
        assert not database.created and database.fresh  # a run killed before its check
        database.checked_fresh()
    with ProcessorDatabase.open(path, IDENTITY, STORES) as database:
        assert not database.created and not database.fresh


def test_state_of_the_plain_key_format_is_refused_with_the_rebuild_fix(tmp_path: Path) -> None:
    """Format 1 stored plain keys; reading it as bucket-ordered keys would find nothing (and a
    purge by range would delete the wrong keys), so it is refused, untouched."""
    path = tmp_path / "processor-0"
    with ProcessorDatabase.open(path, IDENTITY, STORES) as database:
        batch = database.begin()
        batch.store("counts").set(b"kept", 1)
        batch.commit()
        meta = json.loads(database.backend.get(META_STORE, META_KEY) or b"")
        meta["format"] = 1
        database.backend.write({META_STORE: [(META_KEY, json.dumps(meta).encode())]})
    with pytest.raises(StoreConflictError) as refused:
        ProcessorDatabase.open(path, IDENTITY, STORES)
    assert "state format 1" in str(refused.value)
    assert "splitstate backfill MODULE:APP --replace" in str(refused.value)
    backend = RocksBackend(path)  # untouched: marked as format 2 again, it reads as before
    meta["format"] = 2
    backend.write({META_STORE: [(META_KEY, json.dumps(meta).encode())]})
    backend.close()
    with ProcessorDatabase.open(path, IDENTITY, STORES) as database:
        assert database.get("counts", b"kept") == 1
