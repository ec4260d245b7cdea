"""What the snapshot store holds is untrusted: anyone who may write to it may have written a
manifest whose id, file names or paths climb out of where they are used. Such a manifest is
refused like a damaged one, a download writes nothing outside its directory and nothing
unchecked under a file's name, and a prune deletes nothing outside the store (issue 33)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from statestore import ProcessorDatabase, StoreCorruptError
from statestore.snapshot_copy import SnapshotDownload, SnapshotUpload
from statestore.snapshot_manifest import SnapshotFile, SnapshotManifest
from statestore.snapshot_store import SnapshotStore
from tests.statestore.conftest import IDENTITY, STORES

_ID = "1700000000000-0badc0de"
_GOOD = SnapshotManifest(
    IDENTITY.app_id,
    0,
    dict(IDENTITY.fixed),
    _ID,
    1.7e9,
    2,
    {("in", 0): 5},
    (
        SnapshotFile("000011.sst", "files/0123456789abcdef/000011.sst", 10, "a" * 64),
        SnapshotFile("CURRENT", f"snapshots/{_ID}/CURRENT", 16, "b" * 64),
    ),
    request="r1",
    epoch="e1",
    instance="run",
)
Change = Callable[[dict[str, Any]], object]


def _file(index: int, **fields: object) -> Change:
    return lambda data: data["files"][index].update(fields)


def _field(**fields: object) -> Change:
    return lambda data: data.update(fields)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (_file(0, name="../../outside/x.sst"), r"files\.0\.name .* not a plain file name"),
        (_file(0, name="/var/outside/x.sst"), r"files\.0\.name .* not a plain file name"),
        (_file(1, name="a/b"), r"files\.1\.name .* not a plain file name"),
        (_file(1, name=".."), r"files\.1\.name .* not a plain file name"),
        (_file(1, name=""), r"files\.1\.name .* not a plain file name"),
        (_file(1, name="CURRENT\x00"), r"files\.1\.name .* not a plain file name"),
        (_file(0, path="../../../etc/x/000011.sst"), r"files\.0\.path .* not where"),
        (_file(0, path="files/../000011.sst"), r"files\.0\.path .* not where"),
        (_file(0, path="/etc/000011.sst"), r"files\.0\.path .* not where"),
        (_file(0, path="files/0123456789abcdef/000012.sst"), r"files\.0\.path .* not where"),
        (_file(1, path="snapshots/1700000000000-deadbeef/CURRENT"), r"files\.1\.path"),
        (_file(0, size=-1), r"files\.0\.size = -1"),
        (_file(0, size="10"), r"files\.0\.size = '10'"),
        (_file(0, size=1.5), r"files\.0\.size = 1\.5"),
        (_file(0, size=True), r"files\.0\.size = True"),
        (_file(0, sha256="00"), r"files\.0\.sha256 = '00': is not a SHA-256"),
        (_file(0, sha256="A" * 64), r"files\.0\.sha256"),
        (_field(id="/home/operator"), r"id = '/home/operator': is not a snapshot id"),
        (_field(id="../../../../victim"), r"id = .*: is not a snapshot id"),
        (_field(id="m1"), r"id = 'm1': is not a snapshot id"),
        (_field(processor=-1), r"processor = -1"),
        (_field(processor="0"), r"processor = '0'"),
        (_field(generation=-2), r"generation = -2"),
        (_field(offsets=[["in", 0, -5]]), r"offsets\.0\.2 = -5"),
        (_field(offsets=[["in", 0]]), r"offsets\.0"),
        (_field(offsets=[["\x1b[2J", 0, 1]]), r"offsets\.0\.0 = .*not a Kafka topic name"),
        (_field(offsets={"in": 5}), r"offsets"),
        (_field(files={"name": "CURRENT"}), r"files"),
        (_field(files=[None]), r"files\.0"),
        (_field(fixed=[]), r"fixed"),
        (_field(created="yesterday"), r"created"),
        (_field(request=5), r"request = 5"),
        (_field(state_format=-1), r"state_format = -1"),
        (lambda data: data.pop("id"), r"id is missing"),
        (lambda data: data["files"].append(data["files"][0]), r"000011\.sst' is named twice"),
    ],
)
def test_a_manifest_not_in_the_form_splitstate_writes_is_refused(
    change: Change, problem: str
) -> None:
    data = _GOOD.to_json()
    change(data)
    with pytest.raises(StoreCorruptError, match=problem) as refused:
        SnapshotManifest.decode(json.dumps(data).encode(), "store/processor-0/manifests/x.json")
    message = str(refused.value)
    assert "store/processor-0/manifests/x.json is refused" in message
    assert "Fix: delete it, and check who may write to the snapshot store" in message


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"[]", "it holds an array, not a JSON object"),
        (b"null", "it holds null, not a JSON object"),
        (b'"x"', "it holds a string, not a JSON object"),
        (b"7", "it holds a number, not a JSON object"),
        (b"\xff\xfe", "cannot be read"),
        (b"{not json", "Expecting property name"),
    ],
)
def test_a_manifest_that_is_no_json_object_cannot_be_read(raw: bytes, problem: str) -> None:
    with pytest.raises(StoreCorruptError, match=problem):
        SnapshotManifest.decode(raw, "x.json")


def test_a_manifest_splitstate_wrote_reads_back_the_same() -> None:
    assert SnapshotManifest.decode(_GOOD.encode(), "x.json") == _GOOD
    older = _GOOD.to_json()
    del older["state_format"], older["instance"], older["request"], older["epoch"]
    assert SnapshotManifest.decode(json.dumps(older).encode(), "x.json").state_format == 1


def _plant(store: SnapshotStore, name: str, data: object) -> str:
    folder = Path(store.path(0, "manifests"))
    folder.mkdir(parents=True, exist_ok=True)
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    (folder / name).write_bytes(raw)
    return str(folder / name)


def test_the_store_skips_a_refused_manifest_saying_where_and_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SnapshotStore(str(tmp_path / "store"), IDENTITY.app_id)
    store.write_manifest(_GOOD)
    array = _plant(store, "0000000000001-00000001.json", b"[]")
    climbing = _plant(store, "0000000000002-00000002.json", dict(_GOOD.to_json(), id="../../x"))
    # a well-formed id, but not its file's: deleting it would delete the other manifest
    renamed = _plant(store, "0000000000003-00000003.json", _GOOD.to_json())
    forged = _GOOD.to_json()
    forged["files"][1]["name"] = "../../../outside"
    named = _plant(store, "0000000000004-00000004.json", forged)
    with caplog.at_level(logging.WARNING, "statestore.snapshot_store"):
        assert store.manifests(0) == [_GOOD]
    warnings = "\n".join(r.getMessage() for r in caplog.records)
    assert f"skipping snapshot {array}: " in warnings
    assert "it holds an array, not a JSON object" in warnings
    assert f"skipping snapshot {climbing}: " in warnings
    assert "id = '../../x': is not a snapshot id" in warnings
    assert f"skipping snapshot {renamed}: it names itself '{_ID}'" in warnings
    assert f"skipping snapshot {named}: " in warnings
    assert "files.1.name = '../../../outside': is not a plain file name" in warnings


def _snapshot(
    database: ProcessorDatabase, store: SnapshotStore, work: Path, n: int = 1
) -> SnapshotManifest:
    """Write some keys, take a checkpoint and upload it as the ``n``-th snapshot."""
    batch = database.begin()
    for i in range(2000):
        batch.store("counts").set(f"key-{i:05d}".encode(), i)
    batch.set_offset("in", 0, 2000)
    batch.commit()
    snapshot_id = f"{1700000000000 + n:013d}-{uuid.uuid4().hex[:8]}"
    checkpoint = work / snapshot_id
    database.snapshot(checkpoint)
    base = SnapshotManifest(
        IDENTITY.app_id, 0, dict(IDENTITY.fixed), snapshot_id, 1.7e9, 0, {("in", 0): 2000}
    )
    upload = SnapshotUpload(store, checkpoint, base, "0123456789abcdef", {})
    while (manifest := upload.step(1 << 20)) is None:
        pass
    upload.close()
    return manifest


def test_a_download_writes_nothing_outside_its_directory(tmp_path: Path) -> None:
    """A manifest built in code (not read back through ``decode``) with a climbing or an
    absolute file name: the download refuses it before writing anything."""
    store = SnapshotStore(str(tmp_path / "store"), IDENTITY.app_id)
    database = ProcessorDatabase.open(tmp_path / "processor-0", IDENTITY, STORES)
    manifest = _snapshot(database, store, tmp_path / "work")
    database.close()
    outside = tmp_path / "outside"
    outside.mkdir()
    payload = b"#!/bin/sh\necho pwned\n"
    Path(store.path(0, "files/0123456789abcdef/payload.sst")).write_bytes(payload)
    digest = hashlib.sha256(payload).hexdigest()
    target = tmp_path / "state" / "restored"
    for name in ("../../outside/relative", str(outside / "absolute")):
        bad = SnapshotFile(name, "files/0123456789abcdef/payload.sst", len(payload), digest)
        forged = SnapshotManifest(**{**vars(manifest), "files": (*manifest.files, bad)})
        with pytest.raises(StoreCorruptError, match="is not a plain file name"):
            download = SnapshotDownload(store, forged, target)
            while not download.step(1 << 20):
                pass
        assert not target.exists()
        assert list(outside.iterdir()) == []
    twice = SnapshotManifest(**{**vars(manifest), "files": (*manifest.files, manifest.files[0])})
    with pytest.raises(StoreCorruptError, match="names a file twice"):
        SnapshotDownload(store, twice, target)
    assert not target.exists()


def test_a_file_takes_its_name_only_once_checked(tmp_path: Path) -> None:
    """A damaged file is copied into a staging file, checked, and deleted: no file of the
    snapshot's ever holds unchecked bytes under its name; one longer than its manifest says
    is refused as soon as it is (not copied to its end)."""
    store = SnapshotStore(str(tmp_path / "store"), IDENTITY.app_id)
    database = ProcessorDatabase.open(tmp_path / "processor-0", IDENTITY, STORES)
    manifest = _snapshot(database, store, tmp_path / "work")
    database.close()
    sst = max((f for f in manifest.files if f.name.endswith(".sst")), key=lambda f: f.size)
    damaged = Path(store.path(0, sst.path))
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    target = tmp_path / "restored"
    download = SnapshotDownload(store, manifest, target)
    with pytest.raises(StoreCorruptError, match=f"snapshot file {sst.name} has .* SHA-256"):
        while not download.step(1 << 20):
            pass
    download.close()
    assert not (target / sst.name).exists()
    assert [p.name for p in target.iterdir() if p.name.startswith(".")] == []

    damaged.write_bytes(bytes(data) + b"\0" * (4 << 20))  # far longer than it should be
    again = SnapshotDownload(store, manifest, tmp_path / "again")
    with pytest.raises(StoreCorruptError, match=f"{sst.name} has more than {sst.size} bytes"):
        while not again.step(64 << 20):
            pass
    again.close()
    assert again.copied < manifest.size + (1 << 20)
    assert not (tmp_path / "again" / sst.name).exists()
    assert [p.name for p in (tmp_path / "again").iterdir() if p.name.startswith(".")] == []


def test_prune_deletes_nothing_outside_the_store(tmp_path: Path) -> None:
    """A manifest whose id climbs out of the store, one whose id is another manifest's, and
    a symbolic link in the store's files: the routine prune after a snapshot deletes none
    of what they point at, and keeps the manifest the second one names."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "important.txt").write_text("keep\n")
    (tmp_path / "victim.json").write_text("{}\n")
    store = SnapshotStore(str(tmp_path / "store"), IDENTITY.app_id)
    database = ProcessorDatabase.open(tmp_path / "processor-0", IDENTITY, STORES)
    first = _snapshot(database, store, tmp_path / "work")
    second = _snapshot(database, store, tmp_path / "work", 2)
    database.close()
    _plant(store, "0000000000001-deadbeef.json", dict(first.to_json(), id="../../../../victim"))
    _plant(store, "0000000000002-deadbeef.json", dict(second.to_json(), created=1.0))
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "000099.sst").write_text("not the store's\n")
    os.symlink(linked, store.path(0, "files/evil"))
    store.prune(0, keep=1)
    assert (victim / "important.txt").read_text() == "keep\n"
    assert (tmp_path / "victim.json").exists()
    assert (linked / "000099.sst").exists()
    assert [m.id for m in store.manifests(0)] == [second.id]
    assert all(Path(store.path(0, f.path)).exists() for f in second.files)


def test_prune_deletes_nothing_when_the_files_folder_itself_is_a_link(tmp_path: Path) -> None:
    """A symbolic link planted as the processor's ``files`` folder: following it from both
    ends made everything it leads to look inside the store, and prune deleted it."""
    victim = tmp_path / "victim"
    (victim / "sub").mkdir(parents=True)
    (victim / "important.txt").write_text("keep\n")
    (victim / "sub" / "000012.sst").write_text("keep\n")
    store = SnapshotStore(str(tmp_path / "store"), IDENTITY.app_id)
    store.write_manifest(_GOOD)
    os.symlink(victim, store.path(0, "files"))
    store.prune(0, keep=1)
    assert (victim / "important.txt").read_text() == "keep\n"
    assert (victim / "sub" / "000012.sst").read_text() == "keep\n"


def test_an_upload_writes_nothing_through_a_link_planted_in_the_store(tmp_path: Path) -> None:
    """Symbolic links planted where an upload writes (its SST files' folder leading out, or
    a file's own name): nothing outside the store is written; a link at a file's name is
    replaced by the file, and a folder leading out is refused, naming it."""
    victim = tmp_path / "victim"
    victim.mkdir()
    database = ProcessorDatabase.open(tmp_path / "processor-0", IDENTITY, STORES)
    batch = database.begin()
    batch.store("counts").set(b"k", 1)
    batch.set_offset("in", 0, 1)
    batch.commit()
    store = SnapshotStore(str(tmp_path / "store"), IDENTITY.app_id)
    try:
        for lineage, plant_folder in (("linked-names", False), ("linked-folder", True)):
            snapshot_id = f"1700000000001-{uuid.uuid4().hex[:8]}"
            checkpoint = database.snapshot(tmp_path / "work" / snapshot_id)
            names = sorted(p.name for p in checkpoint.iterdir())
            folders = {"files": f"files/{lineage}", "snapshots": f"snapshots/{snapshot_id}"}
            for kind, folder in folders.items():
                if plant_folder and kind == "files":
                    Path(store.path(0, "files")).mkdir(parents=True, exist_ok=True)
                    os.symlink(victim, store.path(0, folder))
                    continue
                Path(store.path(0, folder)).mkdir(parents=True, exist_ok=True)
                for name in names:
                    (victim / name).write_text("keep\n")
                    os.symlink(victim / name, store.path(0, f"{folder}/{name}"))
            base = SnapshotManifest(
                IDENTITY.app_id, 0, dict(IDENTITY.fixed), snapshot_id, 1.7e9, 0, {("in", 0): 1}
            )
            upload = SnapshotUpload(store, checkpoint, base, lineage, {})
            try:
                if plant_folder:
                    with pytest.raises(PermissionError, match="leads its folder outside"):
                        while upload.step(1 << 20) is None:
                            pass
                else:
                    while (manifest := upload.step(1 << 20)) is None:
                        pass
                    assert all(not Path(store.path(0, f.path)).is_symlink() for f in manifest.files)
            finally:
                upload.close()
            assert {p.read_text() for p in victim.iterdir()} == {"keep\n"}
    finally:
        database.close()
