"""Snapshots without a broker: the taker's slices and requests, a transfer's key filter and
offsets, a lost directory restored, and the config's rules."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from framework.config import AppConfig, ConfigError
from framework.coordination.registry import TopicEntry
from framework.ops.cli.run import check_input_retention
from framework.processing import ProcessorStoppedError
from framework.runtime.recovery import check_rebuildable
from framework.runtime.retention import check_catch_up_history
from framework.snapshots.restore import restore_lost_state
from framework.snapshots.source_starts import source_scope, source_starts
from framework.snapshots.taker import SnapshotTaker
from framework.snapshots.transfer import SnapshotTransfer
from framework.snapshots.transfer_progress import read_transfer_progress
from rebalance import TopicHistory, bucket, key_hash
from rebalance.control import ControlState
from rebalance.control_records import SnapshotRequest
from rebalance.plan import read_set
from statestore import DatabaseIdentity, ProcessorDatabase, StoreSpec
from statestore.errors import StoreLockedError
from statestore.lock import DirectoryLock
from statestore.rocks import RocksBackend
from statestore.snapshot_copy import SnapshotDownload, SnapshotUpload
from statestore.snapshot_store import SnapshotStore
from tests.clocks import ManualClock

TOPIC = "in"
STORES = [StoreSpec("counts")]
KEYS = [f"key-{i}".encode() for i in range(3000)]


def config_for(tmp_path: Path, **fields: object) -> AppConfig:
    return AppConfig.model_validate(
        {
            "app_id": "snaps",
            "inputs": [{"topic": TOPIC, "partitions": 4}],
            "initial_processors": 2,
            "state_dir": str(tmp_path / "state"),
            "snapshots": {"slice_bytes": 1 << 16, "interval_seconds": 10},
            **fields,
        }
    )


def open_processor(config: AppConfig, processor: int) -> ProcessorDatabase:
    identity = DatabaseIdentity(config.app_id, processor, {"initial_processors": 2})
    return ProcessorDatabase.open(config.app_state_dir / f"processor-{processor}", identity, STORES)


def fill(database: ProcessorDatabase, owner: int, offsets: dict[int, int]) -> dict[bytes, int]:
    """Give every key processor ``owner`` owns at P=2 a value; returns them."""
    values = {k: i for i, k in enumerate(KEYS) if bucket(key_hash(k), 2, 2) == owner}
    batch = database.begin()
    for key, value in values.items():
        batch.store("counts").set(key, value)
    for partition, offset in offsets.items():
        batch.set_offset(TOPIC, partition, offset)
    batch.commit()
    return values


def gained_from(key: bytes) -> int | None:
    """Of a 2 -> 3 scale: processor 2 gains from processor 0 the keys with h % 4 == 2."""
    h = key_hash(key)
    return bucket(h, 2, 2) if bucket(h, 2, 3) == 2 else None


def joining_transfer(
    receiver: ProcessorDatabase,
    store: SnapshotStore,
    work: Path,
    clock: ManualClock,
    slice_: int,
    **options: Any,
) -> SnapshotTransfer:
    """Processor 2's transfer of partition 2 from processor 0 in scale 1 (2 -> 3)."""
    return SnapshotTransfer(
        2,
        1,
        scope="catchup-1",
        loaded_flag="catchup-1-bootstrapped",
        handoffs={0: frozenset({(TOPIC, 2)})},
        topics={TOPIC: TopicHistory(TOPIC, (4,))},
        gained_from=gained_from,
        database=receiver,
        store=store,
        work_dir=work,
        clock=clock,
        slice_bytes=slice_,
        **options,
    )


def take(taker: SnapshotTaker, owned: set[tuple[str, int]], state: ControlState) -> None:
    """Step the taker until its upload is done."""
    taken = taker.taken
    taker.step(owned, state)
    while taker.upload is not None:
        assert taker.upload.copied <= taker.upload.total
        taker.step(owned, state)
    assert taker.taken == taken + 1


def test_a_transfer_keeps_exactly_the_gained_keys_with_the_snapshot_offsets(
    tmp_path: Path,
) -> None:
    """Processor 2 joins (P 2 -> 3): it gains from processor 0 the keys with h % 4 == 2,
    which live in partition 2; its catch-up starts where processor 0's snapshot ended."""
    config = config_for(tmp_path)
    clock = ManualClock(100.0)
    store = SnapshotStore(config.snapshot_url, config.app_id)
    source = open_processor(config, 0)
    values = fill(source, 0, {0: 500, 2: 700})
    taker = SnapshotTaker(config, 0, source, store, clock)
    take(taker, {(TOPIC, 0), (TOPIC, 2)}, ControlState())
    assert taker.latest is not None and taker.latest.generation == 0
    # a transfer for generation 1 waits for a snapshot taken in it
    receiver = open_processor(config, 2)

    transfer = joining_transfer(receiver, store, tmp_path / "work", clock, 1 << 12)
    for _ in range(5):
        clock.now += 1
        assert transfer.poll() is None
    assert "waiting for snapshots of processors [0]" in transfer.describe()
    waiting = read_transfer_progress(tmp_path / "work")
    assert waiting is not None and waiting.phase == "waiting" and waiting.waiting_for == [0]
    assert "processor 2 snapshot transfer waiting" in waiting.render()
    taker.request(SnapshotRequest("r1").id)
    take(taker, {(TOPIC, 0), (TOPIC, 2)}, _scale_state())
    assert taker.latest is not None and taker.latest.request == "r1"
    done = None
    reports = []
    for _ in range(10_000):
        clock.now += 1
        if (done := transfer.poll()) is not None:
            break
        reports.append(read_transfer_progress(tmp_path / "work"))
    copying = [r for r in reports if r is not None and r.phase == "copying"]
    assert copying and copying[-1].bytes_total == taker.latest.size, copying[-1:]
    assert 0 < copying[-1].bytes_copied <= copying[-1].bytes_total
    assert any(r is not None and r.phase == "filtering" for r in reports), reports
    expected = {k: v for k, v in values.items() if gained_from(k) == 0}
    assert done == len(expected) > 0
    assert dict(receiver.items("counts")) == expected
    assert receiver.progress("catchup-1") == {(TOPIC, 2): 700}
    assert source_starts(receiver, "catchup-1", frozenset({0})) == {(TOPIC, 2): {0: 700}}
    assert receiver.progress(source_scope("catchup-1", 0)) == {(TOPIC, 2): 700}
    assert receiver.has_flag("catchup-1-bootstrapped")
    assert not (tmp_path / "work").exists()
    source.close()
    receiver.close()


def _scale_state(epoch: str | None = None) -> ControlState:
    """A control state whose last scale has generation 1 (as the taker sees it)."""
    state = ControlState()
    app = {"type": "app", "app_id": "snaps", "initial_processors": 2, "inputs": {TOPIC: 4}}
    for record in (
        {**app, **({"epoch": epoch} if epoch else {})},
        {"type": "generation", "generation": 0, "processors": 2},
        {
            "type": "scale",
            "generation": 1,
            "processors": 3,
            "partitions": {TOPIC: 4},
            "request": "s",
        },
    ):
        state = state.apply(record)
    assert state.scaling is not None and state.scaling.generation == 1, state.ignored
    return state


def test_a_lost_directory_comes_back_from_the_newest_snapshot_that_covers_it(
    tmp_path: Path,
) -> None:
    config = config_for(tmp_path)
    clock = ManualClock(5.0)
    store = SnapshotStore(config.snapshot_url, config.app_id)
    database = open_processor(config, 1)
    values = fill(database, 1, {1: 40, 3: 60})
    owned = {(TOPIC, 1), (TOPIC, 3)}
    taker = SnapshotTaker(config, 1, database, store, clock)
    take(taker, owned, ControlState())
    identity = database.identity
    path = database.path
    assert path is not None
    database.close()
    # a directory that exists is never touched
    assert restore_lost_state(config, identity, path, owned, None) is None
    lost = path.parent / "gone"
    path.rename(lost)
    # a snapshot of another control log (the app was started over) is not used
    assert restore_lost_state(config, identity, path, owned, "another-epoch") is None
    assert not path.exists()
    # a snapshot that misses a partition owned now is not used
    assert restore_lost_state(config, identity, path, owned | {(TOPIC, 0)}, None) is None
    assert not path.exists()
    # another run of the processor holds the directory (restoring it): this one waits its turn
    held = DirectoryLock(path)
    with pytest.raises(StoreLockedError, match="in use"):
        restore_lost_state(config, identity, path, owned, None)
    held.release()
    assert not path.exists() and not list(path.parent.glob(f".{path.name}.restoring*"))
    # another run of the processor restores it while this one copies: this one lets it be
    stale = path.with_name(f".{path.name}.restoring")  # left by a restore killed earlier
    stale.mkdir()
    real_rename = Path.rename

    def beaten(self: Path, target: Path) -> Path:
        if target == path:
            shutil.copytree(lost, path)  # the other run's restore lands first
        return real_rename(self, target)

    with mock.patch.object(Path, "rename", beaten):
        assert restore_lost_state(config, identity, path, owned, None) is None
    assert not stale.exists()
    assert not list(path.parent.glob(f".{path.name}.restoring*"))
    assert (path / "CURRENT").exists()
    shutil.rmtree(path)
    restored = restore_lost_state(config, identity, path, owned, None)
    assert restored is not None and restored.offsets == {(TOPIC, 1): 40, (TOPIC, 3): 60}
    back = open_processor(config, 1)
    try:
        assert back.offsets() == {(TOPIC, 1): 40, (TOPIC, 3): 60}
        assert dict(back.items("counts")) == values
        # its next snapshot copies no SST file again (inherited by the new lineage)
        again = SnapshotTaker(config, 1, back, store, clock)
        again.request()
        take(again, owned, ControlState())
        assert again.latest is not None
        assert {f.path for f in again.latest.files if f.name.endswith(".sst")} >= {
            f.path for f in restored.files if f.name.endswith(".sst")
        }
    finally:
        back.close()


def test_snapshot_config_rules(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="bootstrap: snapshot needs snapshots"):
        config_for(tmp_path, snapshots={"enabled": False})
    assert config_for(tmp_path, bootstrap="replay", snapshots={"enabled": False})
    assert config_for(tmp_path).snapshot_url == str(tmp_path / "state-snapshots")
    short = config_for(tmp_path, inputs=[{"topic": TOPIC, "partitions": 4, "retention_ms": 60_000}])
    with pytest.raises(ConfigError, match=r"at least 3620000"):
        check_input_retention(short)
    check_input_retention(
        config_for(tmp_path, inputs=[{"topic": TOPIC, "partitions": 4, "retention_ms": -1}])
    )


class _Retained:
    """A consumer whose partition 0 retention deleted below 200 (watermarks only)."""

    def watermarks(self, positions: list[tuple[str, int]]) -> dict[tuple[str, int], object]:
        low = {(TOPIC, 0): 200}
        return {p: type("W", (), {"start": low.get(p, 0)})() for p in positions}

    def close(self) -> None:
        """Nothing to close."""


def test_a_scale_in_from_two_sources_reads_no_ancestor_neither_needs(tmp_path: Path) -> None:
    """Scale-in 5 -> 2 after growths 2 -> 4 -> 8: receiver 0 gains {2, 6} from processor 2 and
    {4} from processor 4. Its own partition 0 is an ancestor of both, below thresholds 100 and
    500 that both sources' states already cover: the catch-up must not read it (helper-5's
    review: it started at the lower source's 100, and retention at 200 refused the scale)."""
    config = config_for(tmp_path)
    clock = ManualClock(100.0)
    store = SnapshotStore(config.snapshot_url, config.app_id)
    history = TopicHistory.of(TOPIC, (2, 4, 8), {2: 100, 3: 100, 4: 500, 5: 500, 6: 300, 7: 300})
    handoffs = {2: frozenset({(TOPIC, 2), (TOPIC, 6)}), 4: frozenset({(TOPIC, 4)})}
    for source, offsets in {2: {2: 900, 6: 50}, 4: {4: 70}}.items():
        database = open_processor(config, source)
        batch = database.begin()
        for key in KEYS:
            if bucket(key_hash(key), 2, 5) == source:
                batch.store("counts").set(key, 1)
        for partition, offset in offsets.items():
            batch.set_offset(TOPIC, partition, offset)
        batch.commit()
        take(
            SnapshotTaker(config, source, database, store, clock),
            {(TOPIC, p) for p in offsets},
            _scale_state(),
        )
        database.close()
    receiver = open_processor(config, 0)

    def gained_from(key: bytes) -> int | None:
        h = key_hash(key)
        source = bucket(h, 2, 5)
        return source if bucket(h, 2, 2) == 0 and source in (2, 4) else None

    transfer = SnapshotTransfer(
        0,
        1,
        scope="catchup-1",
        loaded_flag="catchup-1-bootstrapped",
        handoffs=handoffs,
        topics={TOPIC: history},
        gained_from=gained_from,
        database=receiver,
        store=store,
        work_dir=tmp_path / "work",
        clock=clock,
        slice_bytes=1 << 20,
    )
    for _ in range(1000):
        clock.now += 1
        if transfer.poll() is not None:
            break
    s1 = sorted(handoffs[2] | handoffs[4])
    bounds = {(r.topic, r.partition): r.end_offset for r in read_set({TOPIC: history}, s1)}
    progress = receiver.progress("catchup-1")
    assert progress[(TOPIC, 0)] >= 500  # neither source needs partition 0
    assert progress[(TOPIC, 2)] == 900 and progress[(TOPIC, 4)] == 70
    reads = {p: (progress.get(p, 0), None if p in s1 else b) for p, b in bounds.items()}
    needed = check_catch_up_history(_Retained(), 0, 1, reads)  # type: ignore[arg-type]
    assert (TOPIC, 0) not in needed
    receiver.close()


def test_a_restored_offset_of_0_is_state_not_its_absence() -> None:
    """A child partition handed over while empty (F = 0) holds, at offset 0, its keys' state
    built from the ancestor; a snapshot restores that 0. Rebuilding from it must be allowed
    (helper-5's review: 0 read as 'no state' refused the restart for good); no offset at all
    is still refused."""
    history = TopicHistory.of(TOPIC, (2, 4), {2: 100, 3: 100})
    inputs = {TOPIC: TopicEntry(history)}
    check_rebuildable(2, (TOPIC, 2), {(TOPIC, 2)}, 0, inputs=inputs, state_dir=None)
    with pytest.raises(ProcessorStoppedError, match="split off by a growth"):
        check_rebuildable(2, (TOPIC, 2), {(TOPIC, 2)}, None, inputs=inputs, state_dir=None)


def test_an_ingest_that_fails_keeps_its_files_for_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ingest fails after the bulk load is recorded (a full disk); the run unwinds and
    cancels the transfer. The recorded load's files must stay, so the next start finishes it
    (helper-5's review: the work directory went, and the state never opened again)."""
    config = config_for(tmp_path)
    clock = ManualClock(100.0)
    store = SnapshotStore(config.snapshot_url, config.app_id)
    source = open_processor(config, 0)
    values = fill(source, 0, {0: 500, 2: 700})
    take(SnapshotTaker(config, 0, source, store, clock), {(TOPIC, 0), (TOPIC, 2)}, _scale_state())
    source.close()
    receiver = open_processor(config, 2)

    transfer = joining_transfer(receiver, store, tmp_path / "work", clock, 1 << 20)

    def full_disk(*_args: object) -> None:
        raise Exception("IO error: No space left on device")

    monkeypatch.setattr(RocksBackend, "ingest", full_disk)
    with pytest.raises(Exception, match="No space left"):
        for _ in range(1000):
            clock.now += 1
            transfer.poll()
    # no snapshot captures the half-ingested state with its pending load (helper-6's
    # review: restored on another disk, the load's files are gone and it never opens)
    assert receiver.bulk_load_pending
    own = SnapshotTaker(config, 2, receiver, store, clock)
    own.request()
    own.step({(TOPIC, 2)}, _scale_state())
    assert own.upload is None and own.taken == 0 and store.manifests(2) == []
    transfer.cancel()  # the run unwinds
    receiver.close()
    monkeypatch.undo()
    again = open_processor(config, 2)  # finishes the recorded load
    try:
        assert dict(again.items("counts")) == {
            k: v for k, v in values.items() if gained_from(k) == 0
        }
        assert again.progress(source_scope("catchup-1", 0)) == {(TOPIC, 2): 700}
    finally:
        again.close()


def test_a_snapshot_is_taken_only_after_the_group_has_its_offsets(tmp_path: Path) -> None:
    """The loop commits the state's offsets to the group before the checkpoint, so a
    receiver starting from a snapshot never starts past T1 (helper-5's review: with the
    asynchronous commit a snapshot was usually ahead of the group, and a source whose state
    fell back after a restore could release at F below it). A refused commit puts it off."""
    config = config_for(tmp_path)
    clock = ManualClock(5.0)
    store = SnapshotStore(config.snapshot_url, config.app_id)
    database = open_processor(config, 1)
    fill(database, 1, {1: 40})
    taker = SnapshotTaker(config, 1, database, store, clock)
    calls: list[dict[tuple[str, int], int]] = []

    def refuse() -> bool:
        calls.append(database.offsets())
        return False

    taker.step({(TOPIC, 1)}, ControlState(), refuse)
    assert store.newest(1) is None and len(calls) == 1

    def agree() -> bool:
        calls.append(database.offsets())
        return True

    taker.step({(TOPIC, 1)}, ControlState(), agree)
    while taker.taken == 0:
        taker.step({(TOPIC, 1)}, ControlState())
    newest = store.newest(1)
    assert newest is not None and newest.offsets == {(TOPIC, 1): 40} and len(calls) == 2
    database.close()


def test_the_snapshot_a_scale_builds_from_is_kept_until_its_handoff_ends(tmp_path: Path) -> None:
    """With keep = 1 the source's snapshots of the scale that cover the handoff stay while
    it is open, also once newer ones no longer cover the partitions (after RELEASE), so a
    receiver that restarts finds the one it took (helper-5's review: pruned, the receiver
    waited forever, or a long copy started over each time), and one that could not use a
    snapshot takes another that stays (helper-7's); once the scale ended they go."""
    config = config_for(tmp_path, snapshots={"keep": 1, "interval_seconds": 10})
    clock = ManualClock(100.0)
    store = SnapshotStore(config.snapshot_url, config.app_id)
    source = open_processor(config, 0)
    fill(source, 0, {0: 500, 2: 700})
    taker = SnapshotTaker(config, 0, source, store, clock)
    scale = _scale_state()
    both = {(TOPIC, 0), (TOPIC, 2)}
    take(taker, both, scale)
    first = taker.latest
    assert first is not None and first.generation == 1
    covering = [first.id]
    for owned in (both, {(TOPIC, 0)}, {(TOPIC, 0)}):  # later ones, then after the release
        taker.request()
        take(taker, owned, scale)
        assert taker.latest is not None
        if owned == both:
            covering.append(taker.latest.id)
    ids = [m.id for m in store.manifests(0)]
    newest = taker.latest
    assert newest is not None
    # every one that covers the open handoff (a receiver may take any), and the newest
    assert ids == [*covering, newest.id], (ids, covering)
    taker.request()
    take(taker, {(TOPIC, 0)}, ControlState())  # the scale is over
    assert [m.id for m in store.manifests(0)] == [taker.latest.id if taker.latest else ""]
    source.close()


def test_a_directory_put_back_from_a_backup_writes_under_a_new_lineage(tmp_path: Path) -> None:
    """A state directory copied back from a backup continues from an older point: RocksDB
    may reuse the names of files the lost future uploaded. Its next snapshot must not
    overwrite them, nor take them for its own (helper-5's review)."""
    config = config_for(tmp_path)
    clock = ManualClock(5.0)
    store = SnapshotStore(config.snapshot_url, config.app_id)
    owned = {(TOPIC, 1), (TOPIC, 3)}
    database = open_processor(config, 1)
    fill(database, 1, {1: 10})
    take(SnapshotTaker(config, 1, database, store, clock), owned, ControlState())
    path = database.path
    assert path is not None
    database.close()
    backup = tmp_path / "backup"
    shutil.copytree(path, backup)
    database = open_processor(config, 1)  # the future that will be lost
    batch = database.begin()
    batch.store("counts").set(b"only-in-the-lost-future", 1)
    batch.set_offset(TOPIC, 1, 20)
    batch.commit()
    taker = SnapshotTaker(config, 1, database, store, clock)
    taker.request()
    take(taker, owned, ControlState())
    lost = taker.latest
    assert lost is not None
    database.close()
    shutil.rmtree(path)
    shutil.copytree(backup, path)  # put back
    database = open_processor(config, 1)
    batch = database.begin()
    batch.store("counts").set(b"after-the-put-back", 2)
    batch.set_offset(TOPIC, 1, 15)
    batch.commit()
    taker = SnapshotTaker(config, 1, database, store, clock)
    taker.request()
    take(taker, owned, ControlState())
    database.close()
    after = taker.latest
    assert after is not None
    lost_lineages = {f.path.split("/")[1] for f in lost.files if f.path.startswith("files/")}
    new_files = {f.path for f in after.files if f.path.startswith("files/")} - {
        f.path for f in lost.files
    }
    assert new_files and all(p.split("/")[1] not in lost_lineages for p in new_files)
    for manifest, key in ((lost, b"only-in-the-lost-future"), (after, b"after-the-put-back")):
        target = tmp_path / f"read-{manifest.id}"
        download = SnapshotDownload(store, manifest, target)
        while not download.step(1 << 20):
            pass
        back = ProcessorDatabase.open_read_only(target)
        try:
            assert back.get("counts", key) is not None
        finally:
            back.close()


def test_the_pinned_snapshot_is_one_of_this_history_of_the_app(tmp_path: Path) -> None:
    """The store still holds a snapshot of an earlier run of the app (another control-log
    epoch) that would otherwise qualify: the source pins the first one of this epoch, the
    one receivers take (helper-6's review: it pinned the old one, so the receiver's was
    pruned under it and the scale never ended)."""
    config = config_for(tmp_path, snapshots={"keep": 1, "interval_seconds": 10})
    clock = ManualClock(100.0)
    store = SnapshotStore(config.snapshot_url, config.app_id)
    source = open_processor(config, 0)
    fill(source, 0, {0: 500, 2: 700})
    both = {(TOPIC, 0), (TOPIC, 2)}
    before = SnapshotTaker(config, 0, source, store, clock)
    take(before, both, _scale_state("earlier"))
    # the app starts over (a new control log) and scales again
    taker = SnapshotTaker(config, 0, source, store, clock)
    scale = _scale_state("now")
    take(taker, both, scale)  # due at once: the newest is of the earlier history
    first = taker.latest
    assert first is not None and first.epoch == "now"
    taker.request()
    take(taker, both, scale)
    assert first.id in [m.id for m in store.manifests(0)]
    source.close()


def test_a_transfer_whose_snapshot_is_damaged_takes_another(tmp_path: Path) -> None:
    """A file of the snapshot a receiver chose is damaged: it takes the newest other one
    instead of the same one again and again (helper-6's review: the scale never ended)."""
    config = config_for(tmp_path)
    clock = ManualClock(100.0)
    store = SnapshotStore(config.snapshot_url, config.app_id)
    source = open_processor(config, 0)
    fill(source, 0, {0: 500, 2: 700})
    taker = SnapshotTaker(config, 0, source, store, clock)
    both = {(TOPIC, 0), (TOPIC, 2)}
    take(taker, both, _scale_state())
    damaged = taker.latest
    assert damaged is not None
    batch = source.begin()
    batch.set_offset(TOPIC, 2, 750)
    batch.commit()
    taker.request()
    take(taker, both, _scale_state())
    for file in damaged.files:  # files of its own (the next snapshot shares the SST files)
        if not file.name.endswith(".sst"):
            target = Path(config.snapshot_url) / config.app_id / "processor-0" / file.path
            target.write_bytes(b"damage" + target.read_bytes()[6:])
    receiver = open_processor(config, 2)

    transfer = joining_transfer(receiver, store, tmp_path / "work", clock, 1 << 12)
    done = None
    for _ in range(2_000):
        clock.now += 1
        if (done := transfer.poll()) is not None:
            break
    assert done is not None, transfer.describe()
    assert receiver.progress("catchup-1") == {(TOPIC, 2): 750}
    source.close()
    receiver.close()


def test_an_operators_request_is_answered_even_when_the_first_upload_fails(
    tmp_path: Path,
) -> None:
    """`splitstate snapshot take` waits for a manifest naming its request: an upload that
    fails must not drop the request (helper-6's review: the command waited until its
    timeout)."""
    config = config_for(tmp_path)
    clock = ManualClock(100.0)
    store = SnapshotStore(config.snapshot_url, config.app_id)
    source = open_processor(config, 0)
    fill(source, 0, {0: 500, 2: 700})
    taker = SnapshotTaker(config, 0, source, store, clock)
    owned = {(TOPIC, 0), (TOPIC, 2)}
    take(taker, owned, ControlState())
    taker.request("r1")
    real_step = SnapshotUpload.step
    calls = []

    def unreachable(self: SnapshotUpload, budget: int) -> object:
        calls.append(budget)
        if len(calls) == 1:
            raise OSError("the store is unreachable")
        return real_step(self, budget)

    with mock.patch.object(SnapshotUpload, "step", unreachable):
        taker.step(owned, ControlState())
        assert taker.upload is None and calls  # it gave up for now
        clock.now += 60
        take(taker, owned, ControlState())
    assert taker.latest is not None and taker.latest.request == "r1"
    source.close()


def test_a_source_without_any_snapshot_has_its_keys_replayed_from_0(tmp_path: Path) -> None:
    """The issue's fallback: a receiver replays a source's keys from offset 0 (and says so)
    only when that source has no snapshot of this app history at all after a while; one with
    an older snapshot is waited for (its snapshot of the scale is on its way)."""
    config = config_for(tmp_path)
    clock = ManualClock(100.0)
    store = SnapshotStore(config.snapshot_url, config.app_id)
    source = open_processor(config, 0)
    fill(source, 0, {0: 500, 2: 700})
    older = SnapshotTaker(config, 0, source, store, clock)
    take(older, {(TOPIC, 0), (TOPIC, 2)}, ControlState())  # generation 0: not of the scale
    receiver = open_processor(config, 2)
    waiting = joining_transfer(
        receiver, store, tmp_path / "work", clock, 1 << 12, fallback_seconds=60.0
    )
    for _ in range(300):
        clock.now += 1
        assert waiting.poll() is None
    assert receiver.progress(source_scope("catchup-1", 0)) == {}
    waiting.cancel()
    store.delete_processor(0)  # now it has none at all
    replaying = joining_transfer(
        receiver, store, tmp_path / "work", clock, 1 << 12, fallback_seconds=60.0
    )
    done = None
    for _ in range(120):
        clock.now += 1
        if (done := replaying.poll()) is not None:
            break
    assert done == 0
    assert receiver.progress(source_scope("catchup-1", 0)) == {(TOPIC, 2): 0}
    assert receiver.progress("catchup-1") == {(TOPIC, 2): 0}
    assert receiver.has_flag("catchup-1-bootstrapped")
    source.close()
    receiver.close()
