"""What holds state is owner-only on disk, whatever the umask (real files, their ``stat``
modes): a processor's directory, its checkpoints, a local snapshot store, a downloaded
snapshot; and a directory an older splitstate left open to other users is tightened, with a
warning."""

from __future__ import annotations

import logging
import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from statestore import ProcessorDatabase
from statestore.owner_only import make_private_dirs, open_private, private_directory
from statestore.snapshot_copy import SnapshotDownload, SnapshotUpload
from statestore.snapshot_lineage import lineage_of
from statestore.snapshot_manifest import SnapshotManifest
from statestore.snapshot_store import SnapshotStore
from tests.statestore.conftest import IDENTITY, STORES

SECRET = {"card": "4111-1111"}


@pytest.fixture(params=[0o022, 0o002, 0o000], ids=["umask-022", "umask-002", "umask-000"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    """The process umask for the test (put back after it)."""
    mask: int = request.param
    previous = os.umask(mask)
    try:
        yield mask
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def modes(root: Path) -> tuple[set[int], set[int]]:
    """The modes of the directories (``root`` included) and of the files under ``root``."""
    entries = [root, *root.rglob("*")]
    return (
        {mode(p) for p in entries if p.is_dir()},
        {mode(p) for p in entries if p.is_file()},
    )


def open_to_others(path: Path) -> None:
    os.chmod(path, 0o755)  # noqa: S103 - as an older splitstate, or the umask, left it


def with_a_value(path: Path) -> ProcessorDatabase:
    database = ProcessorDatabase.open(path, IDENTITY, STORES)
    batch = database.begin()
    batch.store("counts").key(b"alice@example.com").set(SECRET)
    batch.set_offset("in", 0, 1)
    batch.commit()
    return database


def upload(database: ProcessorDatabase, store: SnapshotStore, work: Path) -> SnapshotManifest:
    snapshot_id = f"{1:013d}-{uuid.uuid4().hex[:8]}"
    checkpoint = database.snapshot(work / snapshot_id)
    base = SnapshotManifest(
        IDENTITY.app_id, 0, dict(IDENTITY.fixed), snapshot_id, 1.0, 0, database.offsets()
    )
    copy = SnapshotUpload(store, checkpoint, base, lineage_of(database.backend).id, {})
    while (manifest := copy.step(1 << 20)) is None:
        pass
    copy.close()
    return manifest


def test_new_directories_and_their_parents_are_0700_whatever_the_umask(
    tmp_path: Path, umask: int
) -> None:
    assert private_directory(tmp_path / "a" / "b" / "c") == tmp_path / "a" / "b" / "c"
    for made in ("a", "a/b", "a/b/c"):
        assert mode(tmp_path / made) == 0o700
    assert make_private_dirs(tmp_path / "d" / "e")
    assert not make_private_dirs(tmp_path / "d" / "e")  # there already
    assert mode(tmp_path / "d") == mode(tmp_path / "d" / "e") == 0o700
    with pytest.raises(FileExistsError):
        private_directory(tmp_path / "a", exist_ok=False)


def test_a_private_file_is_new_and_0600(tmp_path: Path, umask: int) -> None:
    with open_private(tmp_path / "new") as new:
        new.write(b"x")
    assert mode(tmp_path / "new") == 0o600
    old = tmp_path / "old"
    old.write_bytes(b"before")
    with pytest.raises(FileExistsError):
        open_private(old)
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(FileExistsError):
        open_private(tmp_path / "link")  # never followed, not even to a missing file
    assert old.read_bytes() == b"before" and not (tmp_path / "elsewhere").exists()


def test_an_open_directory_is_tightened_with_a_warning_and_others_are_left(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    open_to_others(tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    os.chmod(state, 0o2775)  # noqa: S103 - group-shared, setgid
    with caplog.at_level(logging.WARNING, logger="statestore.owner_only"):
        private_directory(state)
    assert mode(state) == 0o2700  # group and others' bits gone; the rest as it was
    assert f"{state} was open to other users (mode 2775" in caplog.text
    assert "now owner-only (mode 2700)" in caplog.text
    assert mode(tmp_path) == 0o755  # its parent is not splitstate's to change
    caplog.clear()
    private_directory(state)
    assert not caplog.text  # said once


def test_a_processor_directory_and_its_checkpoint_are_owner_only(
    tmp_path: Path, umask: int
) -> None:
    open_to_others(tmp_path)
    database = with_a_value(tmp_path / "state" / "processor-0")
    try:
        directories, _ = modes(tmp_path / "state")
        assert directories == {0o700}  # state/ (made for its lock) and processor-0/
        checkpoint = database.snapshot(tmp_path / "staging" / "snap-1")
        assert mode(tmp_path / "staging") == mode(checkpoint) == 0o700
        assert sorted(p.name for p in (tmp_path / "staging").iterdir()) == ["snap-1"]
    finally:
        database.close()


def test_a_processor_directory_an_older_version_left_open_is_tightened_on_open(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "processor-0"
    with_a_value(path).close()
    open_to_others(path)
    with caplog.at_level(logging.WARNING), ProcessorDatabase.open(path, IDENTITY, STORES) as db:
        assert db.get("counts", b"alice@example.com") == SECRET
    assert mode(path) == 0o700
    assert f"{path} was open to other users (mode 0755" in caplog.text


@pytest.mark.parametrize("url_kind", ["directory", "file-url"])
def test_a_local_snapshot_store_and_a_downloaded_snapshot_are_owner_only(
    tmp_path: Path, umask: int, url_kind: str
) -> None:
    open_to_others(tmp_path)
    root = tmp_path / "store"
    url = str(root) if url_kind == "directory" else root.as_uri()
    store = SnapshotStore(url, IDENTITY.app_id)
    database = with_a_value(tmp_path / "processor-0")
    try:
        manifest = upload(database, store, tmp_path / "work")
    finally:
        database.close()
    directories, files = modes(root)
    assert directories == {0o700} and files == {0o600}
    assert len(files) and any(p.suffix == ".sst" for p in root.rglob("*"))
    assert [m.id for m in store.manifests(0)] == [manifest.id]  # read back through it
    target = tmp_path / "downloads" / "processor-0"
    download = SnapshotDownload(store, manifest, target)
    while not download.step(1 << 20):
        pass
    download.close()
    directories, files = modes(tmp_path / "downloads")
    assert directories == {0o700} and files == {0o600}
    with ProcessorDatabase.open(target, IDENTITY, STORES) as restored:
        assert restored.get("counts", b"alice@example.com") == SECRET


def test_the_apps_folder_an_older_version_left_open_in_the_store_is_tightened(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "store" / IDENTITY.app_id
    folder.mkdir(parents=True)
    open_to_others(folder)
    store = SnapshotStore(str(tmp_path / "store"), IDENTITY.app_id)
    assert store.manifests(0) == [] and mode(folder) == 0o755  # reading changes nothing
    database = with_a_value(tmp_path / "processor-0")
    try:
        with caplog.at_level(logging.WARNING, logger="statestore.owner_only"):
            upload(database, store, tmp_path / "work")
    finally:
        database.close()
    assert mode(folder) == 0o700
    assert f"{folder} was open to other users (mode 0755" in caplog.text
