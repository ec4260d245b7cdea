"""A forged or malformed manifest in the snapshot store, as the processors meet it: a lost-disk
restore skips it for the older snapshot and writes nothing outside the state directory, a
receiver's transfer deletes no directory it names, and one holding ``[]`` stops no reader
(issue 33)."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import replace
from pathlib import Path

import pytest

from framework.ops.snapshot_status import collect_snapshots
from framework.snapshots.restore import restore_lost_state
from framework.snapshots.taker import SnapshotTaker
from rebalance.control import ControlState
from statestore import DatabaseIdentity
from statestore.snapshot_manifest import SnapshotManifest
from statestore.snapshot_store import SnapshotStore
from tests.clocks import ManualClock
from tests.framework.snapshot_world import (
    TOPIC,
    config_for,
    fill,
    gained_from,
    joining_transfer,
    open_processor,
    scale_state,
    take,
)

OWNED = {(TOPIC, 1), (TOPIC, 3)}
IDENTITY = DatabaseIdentity("snaps", 1, {"initial_processors": 2})


def _two_snapshots(tmp_path: Path) -> tuple[SnapshotStore, SnapshotManifest, SnapshotManifest]:
    """Processor 1's state with two snapshots in the store (offsets 40 then 50 of 1)."""
    config = config_for(tmp_path)
    clock = ManualClock(5.0)
    store = SnapshotStore(config.snapshot_url, config.app_id)
    database = open_processor(config, 1)
    fill(database, 1, {1: 40, 3: 60})
    taker = SnapshotTaker(config, 1, database, store, clock, instance="run")
    take(taker, OWNED, ControlState())
    older = taker.latest
    fill(database, 1, {1: 50})
    clock.now += 100
    taker.request()
    take(taker, OWNED, ControlState())
    newer = taker.latest
    database.close()
    assert older is not None and newer is not None and older.id < newer.id
    return store, older, newer


def _rewrite(store: SnapshotStore, manifest: SnapshotManifest, data: object) -> Path:
    path = Path(store.path(manifest.processor, f"manifests/{manifest.id}.json"))
    path.write_text(json.dumps(data))
    return path


def test_a_lost_disk_restore_refuses_a_manifest_naming_files_outside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Someone with write access to the store adds files named ``../../outside/x`` and
    ``/abs/outside/y`` (with their blob, size and SHA-256) to the newest manifest: the
    restore refuses it, saying where and why, and restores the older snapshot."""
    store, older, newer = _two_snapshots(tmp_path)
    config = config_for(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    payload = b"#!/bin/sh\necho pwned\n"
    blob = f"files/{newer.files[0].path.split('/')[1]}/zz-payload.sst"
    Path(store.path(1, blob)).write_bytes(payload)
    data = newer.to_json()
    for name in ("../../outside/relative", str(outside / "absolute")):
        entry = {"name": name, "path": blob, "size": len(payload)}
        data["files"].append({**entry, "sha256": hashlib.sha256(payload).hexdigest()})
    forged = _rewrite(store, newer, data)
    path = config.app_state_dir / "processor-1"
    path.rename(tmp_path / "gone")  # the disk is lost
    with caplog.at_level(logging.WARNING):
        restored = restore_lost_state(config, IDENTITY, path, OWNED, None)
    assert list(outside.iterdir()) == []
    assert list(tmp_path.glob("**/relative")) == []
    assert restored is not None and restored.id == older.id
    back = open_processor(config, 1)
    try:
        assert back.offsets() == {(TOPIC, 1): 40, (TOPIC, 3): 60}
    finally:
        back.close()
    warnings = "\n".join(r.getMessage() for r in caplog.records)
    assert f"skipping snapshot {forged}: " in warnings
    assert "'../../outside/relative': is not a plain file name" in warnings
    assert "check who may write to the snapshot store" in warnings


def test_a_manifest_holding_an_array_stops_no_reader(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``[]`` (or a list of the right fields, or a string) as the newest manifest: a
    processor's start, ``status`` and a lost-disk restore skip it with a warning."""
    store, _, newer = _two_snapshots(tmp_path)
    config = config_for(tmp_path)
    folder = Path(store.path(1, "manifests"))
    (folder / "9999999999997-00000001.json").write_text("[]")
    (folder / "9999999999998-00000002.json").write_text(json.dumps(list(newer.to_json())))
    (folder / "9999999999999-00000003.json").write_text('"a string"')
    database = open_processor(config, 1)
    try:
        taker = SnapshotTaker(config, 1, database, store, ManualClock(5.0), instance="run")
        assert taker.latest == newer
    finally:
        database.close()
    report = collect_snapshots(config, [1], {}, 0.0)
    assert report is not None and report.error is None and report.newest[1] == newer
    path = config.app_state_dir / "processor-1"
    path.rename(tmp_path / "gone")
    restored = restore_lost_state(config, IDENTITY, path, OWNED, None)
    assert restored == newer
    warnings = "\n".join(r.getMessage() for r in caplog.records)
    assert f"skipping snapshot {folder / '9999999999997-00000001.json'}" in warnings
    assert "it holds an array, not a JSON object" in warnings
    assert "it holds a string, not a JSON object" in warnings


@pytest.mark.parametrize("forged_id", ["absolute", "../../../victim"])
def test_a_transfer_never_deletes_a_directory_a_manifest_names(
    tmp_path: Path, forged_id: str
) -> None:
    """A copy of the source's snapshot whose id is an absolute path, or one climbing out of
    the receiver's work directory, sorted first: the receiver (``bootstrap: snapshot``)
    refuses it, deletes nothing there, and builds from the real one."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("precious\n")
    config = config_for(tmp_path)
    clock = ManualClock(100.0)
    store = SnapshotStore(config.snapshot_url, config.app_id)
    source = open_processor(config, 0)
    values = fill(source, 0, {0: 500, 2: 700})
    taker = SnapshotTaker(config, 0, source, store, clock, instance="run")
    take(taker, {(TOPIC, 0), (TOPIC, 2)}, scale_state())
    legit = taker.latest
    assert legit is not None
    forged = dict(legit.to_json(), id=str(victim) if forged_id == "absolute" else forged_id)
    folder = Path(store.path(0, "manifests"))
    (folder / "0000000000001-deadbeef.json").write_text(json.dumps(forged))
    receiver = open_processor(config, 2)
    work = tmp_path / "work" / "transfer"
    (work / "from-0").mkdir(parents=True)  # left by a run killed while it copied
    transfer = joining_transfer(receiver, store, work, clock, 1 << 12)
    done = None
    try:
        for _ in range(2_000):
            clock.now += 1
            if (done := transfer.poll()) is not None:
                break
        assert (victim / "precious.txt").read_text() == "precious\n"
        assert done is not None, transfer.describe()
        assert dict(receiver.items("counts")) == {
            k: v for k, v in values.items() if gained_from(k) == 0
        }
        assert receiver.progress("catchup-1") == {(TOPIC, 2): 700}
    finally:
        source.close()
        receiver.close()


class _ForgingStore(SnapshotStore):
    """A store whose listing also hands out a copy of each manifest with another id, as a
    manifest built in code (never read through ``decode``) could have."""

    def __init__(self, url: str, app_id: str, forged_id: str) -> None:
        super().__init__(url, app_id)
        self.forged_id = forged_id

    def manifests(self, processor: int) -> list[SnapshotManifest]:
        listed = super().manifests(processor)
        return [*(replace(m, id=self.forged_id) for m in listed), *listed]


def test_a_transfer_builds_its_directory_only_from_a_plain_id(tmp_path: Path) -> None:
    """The transfer checks the id it makes a directory of (and deletes) itself, whatever
    handed it the manifest: an absolute one is refused and the real snapshot used."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("precious\n")
    config = config_for(tmp_path)
    clock = ManualClock(100.0)
    source = open_processor(config, 0)
    fill(source, 0, {0: 500, 2: 700})
    honest = SnapshotStore(config.snapshot_url, config.app_id)
    taker = SnapshotTaker(config, 0, source, honest, clock, instance="run")
    take(taker, {(TOPIC, 0), (TOPIC, 2)}, scale_state())
    store = _ForgingStore(config.snapshot_url, config.app_id, str(victim))
    receiver = open_processor(config, 2)
    transfer = joining_transfer(receiver, store, tmp_path / "work", clock, 1 << 12)
    done = None
    try:
        for _ in range(2_000):
            clock.now += 1
            if (done := transfer.poll()) is not None:
                break
        assert done is not None, transfer.describe()
        assert receiver.progress("catchup-1") == {(TOPIC, 2): 700}
    finally:
        source.close()
        receiver.close()
        assert (victim / "precious.txt").exists(), "a directory outside the work dir was deleted"
