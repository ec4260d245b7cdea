"""Snapshots in the store: complete only with a manifest, copied incrementally, checked on
the way back, and pruned to the newest few; in a local directory and in S3 (moto's
S3-compatible server, started on 127.0.0.1: a well-kept pip package, so a fresh clone has it
with no download of a server binary)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyarrow import fs as pafs

from statestore import ProcessorDatabase, StoreCorruptError
from statestore.snapshot_copy import SnapshotDownload, SnapshotUpload
from statestore.snapshot_lineage import lineage_of
from statestore.snapshot_manifest import SnapshotFile, SnapshotManifest
from statestore.snapshot_store import SnapshotStore
from tests.s3_server import CREDENTIALS, s3_server, snapshot_url
from tests.statestore.conftest import IDENTITY, STORES

_taken = 0


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """moto's S3 server on a free port of 127.0.0.1, with a bucket ``snapshots``."""
    with s3_server() as endpoint:
        yield endpoint


@pytest.fixture(params=["local", "s3"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> SnapshotStore:
    """An empty snapshot store: a directory, or a prefix of an S3 bucket."""
    if request.param == "local":
        return SnapshotStore(str(tmp_path / "store"), IDENTITY.app_id)
    endpoint = request.getfixturevalue("s3_endpoint")
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    return SnapshotStore(snapshot_url(endpoint), IDENTITY.app_id)


def _files(store: SnapshotStore) -> set[str]:
    selector = pafs.FileSelector(store.root, recursive=True, allow_not_found=True)
    return {i.path for i in store.fs.get_file_info(selector) if i.type == pafs.FileType.File}


def _write(database: ProcessorDatabase, first: int, count: int, offset: int) -> None:
    batch = database.begin()
    counts = batch.store("counts")
    for i in range(first, first + count):
        counts.set(f"key-{i:06d}".encode(), i)
    batch.set_offset("in", 0, offset)
    batch.commit()


def _snapshot(
    database: ProcessorDatabase, store: SnapshotStore, work: Path, budget: int = 1 << 30
) -> tuple[SnapshotManifest, int]:
    """Take and upload a snapshot; returns it and the bytes copied."""
    global _taken  # noqa: PLW0603 - ids must grow within a test
    _taken += 1
    snapshot_id = f"{_taken:013d}-{uuid.uuid4().hex[:8]}"
    checkpoint = work / snapshot_id
    database.snapshot(checkpoint)
    lineage = lineage_of(database.backend)
    known = {
        f.name: f
        for m in store.manifests(0)
        for f in m.files
        if f.path == f"files/{lineage.id}/{f.name}"
    }
    base = SnapshotManifest(
        app_id=IDENTITY.app_id,
        processor=0,
        fixed=dict(IDENTITY.fixed),
        id=snapshot_id,
        created=float(_taken),
        generation=0,
        offsets={p: o for p, o in database.offsets().items()},
    )
    before = store.manifests(0)
    upload = SnapshotUpload(store, checkpoint, base, lineage.id, known)
    while (manifest := upload.step(budget)) is None:
        assert store.manifests(0) == before, "the manifest came before the files"
    upload.close()
    assert not checkpoint.exists()
    return manifest, upload.total


def _restore(store: SnapshotStore, manifest: SnapshotManifest, target: Path) -> ProcessorDatabase:
    download = SnapshotDownload(store, manifest, target)
    while not download.step(1 << 16):
        pass
    return ProcessorDatabase.open(target, IDENTITY, STORES)


def test_a_snapshot_restores_to_the_same_state_and_offsets(
    tmp_path: Path, store: SnapshotStore
) -> None:
    database = ProcessorDatabase.open(tmp_path / "processor-0", IDENTITY, STORES)
    _write(database, 0, 5000, 5000)
    manifest, copied = _snapshot(database, store, tmp_path / "work", budget=4096)
    assert manifest.offsets == {("in", 0): 5000}
    assert copied == manifest.size > 0
    assert [m.id for m in store.manifests(0)] == [manifest.id]
    restored = _restore(store, manifest, tmp_path / "restored")
    try:
        assert restored.offsets() == {("in", 0): 5000}
        assert list(restored.items("counts")) == list(database.items("counts"))
    finally:
        restored.close()
        database.close()


def test_sst_files_are_copied_once_and_pruning_keeps_the_newest(
    tmp_path: Path, store: SnapshotStore
) -> None:
    database = ProcessorDatabase.open(tmp_path / "processor-0", IDENTITY, STORES)
    _write(database, 0, 20_000, 100)
    first, _ = _snapshot(database, store, tmp_path / "work")
    _write(database, 20_000, 10, 110)
    second, copied = _snapshot(database, store, tmp_path / "work")
    shared = {f.path for f in first.files} & {f.path for f in second.files}
    assert any(path.endswith(".sst") for path in shared), "the first SST file was copied again"
    assert copied < second.size
    _write(database, 30_000, 10, 120)
    third, _ = _snapshot(database, store, tmp_path / "work")
    deleted = store.prune(0, keep=2)
    assert [m.id for m in store.manifests(0)] == [second.id, third.id]
    kept_paths = {store.path(0, f.path) for m in (second, third) for f in m.files}
    assert {p for p in _files(store) if "/manifests/" not in p} == kept_paths
    assert deleted == len({f.path for f in first.files if f.path.startswith("files/")} - shared)
    restored = _restore(store, second, tmp_path / "restored")
    try:
        assert restored.offsets() == {("in", 0): 110}
        assert restored.get("counts", b"key-020009") == 20_009
        assert restored.get("counts", b"key-030000") is None
    finally:
        restored.close()
        database.close()


def test_a_snapshot_without_its_manifest_does_not_exist(
    tmp_path: Path, store: SnapshotStore
) -> None:
    database = ProcessorDatabase.open(tmp_path / "processor-0", IDENTITY, STORES)
    try:
        _write(database, 0, 1000, 10)
        database.snapshot(tmp_path / "checkpoint")
        base = SnapshotManifest(
            IDENTITY.app_id, 0, dict(IDENTITY.fixed), f"{1:013d}-00000000", 1.0, 0, {}
        )
        upload = SnapshotUpload(store, tmp_path / "checkpoint", base, "lineage", {})
        assert upload.step(100) is None  # killed mid-copy
        upload.close()
        assert store.manifests(0) == []
        assert store.newest(0) is None
        store.prune(0, keep=1)  # sweeps the half-copied files
        assert _files(store) == set()
    finally:
        database.close()


def test_a_damaged_file_is_refused_on_the_way_back(tmp_path: Path, store: SnapshotStore) -> None:
    database = ProcessorDatabase.open(tmp_path / "processor-0", IDENTITY, STORES)
    _write(database, 0, 1000, 10)
    manifest, _ = _snapshot(database, store, tmp_path / "work")
    database.close()
    sst = next(f for f in manifest.files if f.name.endswith(".sst"))
    damaged = store.path(0, sst.path)
    data = bytearray(store.read(damaged))
    data[len(data) // 2] ^= 0xFF
    with store.fs.open_output_stream(damaged) as stream:
        stream.write(bytes(data))
    download = SnapshotDownload(store, manifest, tmp_path / "restored")
    with pytest.raises(StoreCorruptError, match=r"SHA-256"):
        while not download.step(1 << 20):
            pass
    download.close()


def test_unreadable_manifests_are_skipped(store: SnapshotStore) -> None:
    folder = store.path(0, "manifests")
    store.fs.create_dir(folder, recursive=True)
    with store.fs.open_output_stream(f"{folder}/{5:013d}-abcdef01.json") as stream:
        stream.write(b"{not json")
    good = SnapshotManifest(
        IDENTITY.app_id,
        0,
        {},
        f"{6:013d}-abcdef02",
        6.0,
        3,
        {("in", 1): 7},
        (SnapshotFile("CURRENT", f"snapshots/{6:013d}-abcdef02/CURRENT", 16, "0" * 64),),
    )
    store.write_manifest(good)
    assert store.manifests(0) == [good]
    assert store.processors() == [0]


def test_a_snapshot_of_the_plain_key_format_is_never_used() -> None:
    """Manifests written before keys were stored by bucket carry no state format: format 1,
    which no restore or transfer may copy into a format-2 database."""
    manifest = SnapshotManifest(
        "app", 0, {"initial_processors": 2}, f"{1:013d}-00000001", 1.0, 0, {("t", 0): 5}
    )
    assert manifest.belongs_to("app", {"initial_processors": 2}, None)
    old = manifest.to_json()
    del old["state_format"]
    decoded = SnapshotManifest.decode(json.dumps(old).encode(), "old.json")
    assert decoded.state_format == 1
    assert not decoded.belongs_to("app", {"initial_processors": 2}, None)
    again = SnapshotManifest.decode(manifest.encode(), "new.json")
    assert again == manifest
