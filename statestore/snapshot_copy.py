"""Copying snapshots to and from the store in bounded slices.

A processor copies between batches: each ``step(budget)`` copies at most ``budget`` bytes and
returns, so the loop never waits for a whole snapshot. ``SnapshotUpload`` copies a RocksDB
checkpoint's files the store does not hold yet and writes the manifest last;
``SnapshotDownload`` copies a snapshot into a new owner-only local directory (``0700``, its
files ``0600``: ``statestore.owner_only``), checking every file's size and SHA-256, so the
directory opens as the database it was: each file is copied into a staging file and takes its
name only once checked, and a name that is not a plain file name (as a manifest from the store
could hold) is refused before anything is written.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, NoReturn

from statestore.errors import StoreCorruptError
from statestore.owner_only import open_private, private_directory
from statestore.snapshot_manifest import SnapshotFile, SnapshotManifest
from statestore.snapshot_names import local_path
from statestore.snapshot_store import SnapshotStore

__all__ = ["IMMUTABLE_SUFFIXES", "SlicedCopy", "SnapshotDownload", "SnapshotUpload"]

#: RocksDB files that never change once written (copied once per lineage)
IMMUTABLE_SUFFIXES = (".sst", ".blob")
_CHUNK = 1 << 20


@dataclass
class _Item:
    name: str
    size: int
    open_source: Callable[[], Any]
    open_target: Callable[[], Any]
    expected: str | None = None
    #: called once the copy is checked (a download moves its staging file into place)
    checked: Callable[[], object] = lambda: None
    #: called when the copy is refused or left half done (a download deletes its staging file)
    dropped: Callable[[], object] = lambda: None


class SlicedCopy:
    """Copies files one after another, at most ``budget`` bytes per ``step``, hashing them."""

    def __init__(self, items: list[_Item]) -> None:
        self._items = items
        self._index = 0
        self._source: Any = None
        self._target: Any = None
        self._hash = hashlib.sha256()
        self._done_in_file = 0
        self.copied = 0
        self.total = sum(item.size for item in items)
        #: SHA-256 (hex) of each file copied
        self.digests: dict[str, str] = {}

    @property
    def done(self) -> bool:
        """Whether every file was copied."""
        return self._index >= len(self._items)

    def step(self, budget: int) -> bool:
        """Copy up to ``budget`` bytes (at least one chunk); ``True`` once all are copied."""
        spent = 0
        while not self.done and spent < max(budget, 1):
            item = self._items[self._index]
            if self._source is None:
                self._source, self._target = item.open_source(), item.open_target()
                self._hash, self._done_in_file = hashlib.sha256(), 0
            chunk = self._source.read(min(_CHUNK, max(budget - spent, 1)))
            if chunk:
                self._target.write(chunk)
                self._hash.update(chunk)
                self._done_in_file += len(chunk)
                spent += len(chunk)
                self.copied += len(chunk)
                if self._done_in_file > item.size:  # never copy more than it should hold
                    self.close()
                    self._refuse(item, f"more than {item.size} bytes")
                continue
            self._finish(item)
        return self.done

    def _finish(self, item: _Item) -> None:
        self._source.close()
        self._target.close()
        self._source = self._target = None
        digest = self._hash.hexdigest()
        if self._done_in_file != item.size or (item.expected and digest != item.expected):
            item.dropped()
            self._refuse(item, f"{self._done_in_file} bytes with SHA-256 {digest}")
        item.checked()
        self.digests[item.name] = digest
        self._index += 1

    @staticmethod
    def _refuse(item: _Item, found: str) -> NoReturn:
        raise StoreCorruptError(
            f"snapshot file {item.name} has {found}, but {item.size} bytes with "
            f"{item.expected} were expected: the file changed or was damaged. Fix: take a new "
            "snapshot (`splitstate snapshot`)."
        )

    def close(self) -> None:
        """Close a file left half-copied (and drop it: a download deletes its staging file)."""
        if self._source is None:
            return
        for stream in (self._source, self._target):
            stream.close()
        self._source = self._target = None
        self._items[self._index].dropped()


class SnapshotUpload:
    """Uploads the checkpoint in ``checkpoint`` as the snapshot ``base`` (its files filled in).

    ``lineage``: the database's lineage (where its SST files go); ``known``: SST files the
    store already holds for this database, by name (from its kept snapshots, or inherited
    from the snapshot it was restored from).
    """

    def __init__(
        self,
        store: SnapshotStore,
        checkpoint: Path,
        base: SnapshotManifest,
        lineage: str,
        known: Mapping[str, SnapshotFile],
    ) -> None:
        self.store = store
        self.checkpoint = checkpoint
        self.base = base
        processor = base.processor
        self._reused: list[SnapshotFile] = []
        self._paths: dict[str, str] = {}
        items: list[_Item] = []
        for local in sorted(checkpoint.iterdir()):
            size = local.stat().st_size
            immutable = local.suffix in IMMUTABLE_SUFFIXES
            already = known.get(local.name)
            if immutable and already is not None and already.size == size:
                self._reused.append(replace(already, name=local.name))
                continue
            folder = f"files/{lineage}" if immutable else f"snapshots/{base.id}"
            relative = self._paths[local.name] = f"{folder}/{local.name}"
            target = store.path(processor, relative)
            items.append(
                _Item(
                    local.name,
                    size,
                    partial(local.open, "rb"),
                    partial(store.fs.open_output_stream, target),
                )
            )
        for folder in {p.rsplit("/", 1)[0] for p in self._paths.values()}:
            store.fs.create_dir(store.path(processor, folder), recursive=True)
        self._copy = SlicedCopy(items)
        self.manifest: SnapshotManifest | None = None

    @property
    def copied(self) -> int:
        """Bytes copied so far."""
        return self._copy.copied

    @property
    def total(self) -> int:
        """Bytes this upload copies (files the store already held are not counted)."""
        return self._copy.total

    def step(self, budget: int) -> SnapshotManifest | None:
        """Copy up to ``budget`` bytes; once all are copied, write the manifest and return it."""
        if self.manifest is not None:
            return self.manifest
        if not self._copy.step(budget):
            return None
        copied = [
            SnapshotFile(name, self._paths[name], (self.checkpoint / name).stat().st_size, digest)
            for name, digest in self._copy.digests.items()
        ]
        files = tuple(sorted([*self._reused, *copied], key=lambda f: f.name))
        manifest = replace(self.base, files=files)
        self.store.write_manifest(manifest)
        self.manifest = manifest
        return manifest

    def close(self) -> None:
        """Stop (finished or not) and delete the local checkpoint."""
        self._copy.close()
        shutil.rmtree(self.checkpoint, ignore_errors=True)


class SnapshotDownload:
    """Copies snapshot ``manifest`` into the new directory ``target``, checking every file
    (``StoreCorruptError`` before anything is written if a file's name is not a plain one,
    or is named twice)."""

    def __init__(self, store: SnapshotStore, manifest: SnapshotManifest, target: Path) -> None:
        self.manifest = manifest
        self.target = target
        what = f"snapshot {manifest.id!r:.40}'s file"
        finals = [local_path(target, f.name, what) for f in manifest.files]
        if len(set(finals)) < len(finals):
            raise StoreCorruptError(
                f"snapshot {manifest.id!r:.40} names a file twice: it is not used. Fix: delete "
                "its manifest, and check who may write to the snapshot store."
            )
        private_directory(target, exist_ok=False)
        items = [
            _download_item(store, manifest.processor, file, final)
            for file, final in zip(manifest.files, finals, strict=True)
        ]
        self._copy = SlicedCopy(items)

    @property
    def copied(self) -> int:
        """Bytes copied so far."""
        return self._copy.copied

    @property
    def total(self) -> int:
        """Bytes of the snapshot."""
        return self._copy.total

    def step(self, budget: int) -> bool:
        """Copy up to ``budget`` bytes; ``True`` once the directory is complete."""
        return self._copy.step(budget)

    def close(self) -> None:
        """Close a file left half-copied (the directory stays; the caller removes it)."""
        self._copy.close()


def _download_item(store: SnapshotStore, processor: int, file: SnapshotFile, final: Path) -> _Item:
    """Copy ``file`` into a staging file beside ``final`` (a dot name no snapshot file has),
    created anew (never through a link), renamed to ``final`` once checked."""
    staging = final.with_name(f".{final.name}.copying")
    return _Item(
        file.name,
        file.size,
        partial(store.fs.open_input_stream, store.path(processor, file.path)),
        partial(open_private, staging),
        file.sha256,
        checked=partial(staging.rename, final),
        dropped=partial(staging.unlink, missing_ok=True),
    )
