"""Snapshots without a broker: the taker's slices, pins and requests, a lost directory
restored, lineages, and the config's rules (transfers: test_snapshot_transfer.py)."""

from __future__ import annotations

import shutil
from pathlib import Path
from unittest import mock

import pytest

from framework.config import ConfigError
from framework.coordination.registry import TopicEntry
from framework.ops.cli.run import check_input_retention
from framework.processing import ProcessorStoppedError
from framework.runtime.recovery import check_rebuildable
from framework.snapshots.restore import restore_lost_state
from framework.snapshots.taker import SnapshotTaker
from rebalance import TopicHistory
from rebalance.control import ControlState
from statestore import ProcessorDatabase
from statestore.errors import StoreLockedError
from statestore.lock import DirectoryLock
from statestore.snapshot_copy import SnapshotDownload, SnapshotUpload
from statestore.snapshot_store import SnapshotStore
from tests.clocks import ManualClock
from tests.framework.snapshot_world import (
    TOPIC,
    config_for,
    fill,
    open_processor,
    scale_state,
    take,
)


def test_a_lost_directory_comes_back_from_the_newest_snapshot_that_covers_it(
    tmp_path: Path,
) -> None:
    config = config_for(tmp_path)
    clock = ManualClock(5.0)
    store = SnapshotStore(config.snapshot_url, config.app_id)
    database = open_processor(config, 1)
    values = fill(database, 1, {1: 40, 3: 60})
    owned = {(TOPIC, 1), (TOPIC, 3)}
    taker = SnapshotTaker(config, 1, database, store, clock, instance="run")
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
        again = SnapshotTaker(config, 1, back, store, clock, instance="run")
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
    taker = SnapshotTaker(config, 1, database, store, clock, instance="run")
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
    taker = SnapshotTaker(config, 0, source, store, clock, instance="run")
    scale = scale_state()
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
    take(SnapshotTaker(config, 1, database, store, clock, instance="run"), owned, ControlState())
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
    taker = SnapshotTaker(config, 1, database, store, clock, instance="run")
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
    taker = SnapshotTaker(config, 1, database, store, clock, instance="run")
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
    before = SnapshotTaker(config, 0, source, store, clock, instance="run")
    take(before, both, scale_state("earlier"))
    # the app starts over (a new control log) and scales again
    taker = SnapshotTaker(config, 0, source, store, clock, instance="run")
    scale = scale_state("now")
    take(taker, both, scale)  # due at once: the newest is of the earlier history
    first = taker.latest
    assert first is not None and first.epoch == "now"
    taker.request()
    take(taker, both, scale)
    assert first.id in [m.id for m in store.manifests(0)]
    source.close()


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
    taker = SnapshotTaker(config, 0, source, store, clock, instance="run")
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
