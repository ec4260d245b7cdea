"""The snapshot store: processors' snapshots in a directory or any ``pyarrow.fs`` URL.

Layout under the store's root (a local directory, ``file://``, ``s3://``, ``gs://``,
``hdfs://``)::

    <app_id>/processor-<J>/files/<lineage>/<name>.sst   immutable SST files, copied once
    <app_id>/processor-<J>/snapshots/<id>/<name>        a snapshot's other files (MANIFEST...)
    <app_id>/processor-<J>/manifests/<id>.json          written last: the snapshot exists

A database's *lineage* names its line of SST files: RocksDB never reuses a file name within
one database, but a database restored from an older snapshot may, so a restored database
starts a new lineage (``statestore.snapshot_lineage``) and its new files cannot overwrite
another's. ``prune`` keeps the newest ``keep`` snapshots and deletes files none of them uses.
A local store is written owner-only (``statestore.owner_only_fs``): directories ``0700``,
files ``0600``.
"""

from __future__ import annotations

import contextlib
import logging
import re
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from pyarrow import fs as pafs

from statestore.errors import StateStoreError, StoreCorruptError
from statestore.owner_only_fs import owner_only_local
from statestore.snapshot_manifest import SnapshotManifest

__all__ = ["SnapshotStore", "redact_url"]

log = logging.getLogger(__name__)
_MANIFEST = re.compile(r"^\d{13}-[0-9a-f]{8}\.json$")
_PROCESSOR = re.compile(r"^processor-(\d+)$")


def redact_url(url: str) -> str:
    """``url`` with any user name and password masked (safe to log)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"*****@{host}", query=""))


class SnapshotStore:
    """Where app ``app_id``'s processors keep their snapshots (``url``: a path or a URL)."""

    def __init__(self, url: str, app_id: str) -> None:
        self.url = url
        self.app_id = app_id
        try:
            if "://" in url:
                filesystem, root = pafs.FileSystem.from_uri(url)
            else:
                filesystem, root = pafs.LocalFileSystem(), str(Path(url).expanduser().resolve())
            if isinstance(filesystem, pafs.LocalFileSystem):  # written owner-only
                filesystem = owner_only_local(f"{root.rstrip('/')}/{app_id}")
        except (ValueError, OSError) as error:
            raise StateStoreError(
                f"snapshots.url {redact_url(url)!r} cannot be used: {error}. Fix: give a local "
                "directory or a URL pyarrow.fs reads (s3://bucket/prefix, gs://, hdfs://, "
                "file:///path), with its credentials in the environment."
            ) from None
        self.fs: pafs.FileSystem = filesystem
        self.root = root.rstrip("/")

    def __repr__(self) -> str:
        return f"SnapshotStore({redact_url(self.url)!r}, {self.app_id!r})"

    def folder(self, processor: int) -> str:
        """The store path of processor ``processor``'s snapshots."""
        return f"{self.root}/{self.app_id}/processor-{processor}"

    def path(self, processor: int, relative: str) -> str:
        """The store path of ``relative`` (as in a manifest) for ``processor``."""
        return f"{self.folder(processor)}/{relative}"

    def processors(self) -> list[int]:
        """The processors that have a folder in the store."""
        infos = self._list(f"{self.root}/{self.app_id}", recursive=False)
        found = [_PROCESSOR.match(info.base_name) for info in infos]
        return sorted(int(match.group(1)) for match in found if match)

    def manifests(self, processor: int) -> list[SnapshotManifest]:
        """Processor ``processor``'s complete snapshots, oldest first (unreadable manifests
        are logged and left out)."""
        found: list[SnapshotManifest] = []
        infos = self._list(self.path(processor, "manifests"), recursive=False)
        for info in sorted(infos, key=lambda i: i.base_name):
            if not _MANIFEST.match(info.base_name):
                continue
            try:
                manifest = SnapshotManifest.decode(self.read(info.path), info.path)
            except (StoreCorruptError, FileNotFoundError) as error:
                log.warning("skipping snapshot %s: %s", info.path, error)
                continue
            if manifest.app_id == self.app_id and manifest.processor == processor:
                found.append(manifest)
            else:
                log.warning(
                    "skipping snapshot %s: it is app %r processor %d's",
                    info.path,
                    manifest.app_id,
                    manifest.processor,
                )
        return found

    def newest(self, processor: int) -> SnapshotManifest | None:
        """Processor ``processor``'s newest complete snapshot."""
        manifests = self.manifests(processor)
        return manifests[-1] if manifests else None

    def read(self, path: str) -> bytes:
        """The bytes of the (small) file at store path ``path``."""
        with self.fs.open_input_stream(path) as stream:
            data: bytes = stream.read()
        return data

    def write_manifest(self, manifest: SnapshotManifest) -> str:
        """Write ``manifest`` last, atomically (a temporary name, then a rename); returns its
        path."""
        folder = self.path(manifest.processor, "manifests")
        self.fs.create_dir(folder, recursive=True)
        final = f"{folder}/{manifest.id}.json"
        staging = f"{folder}/.{manifest.id}.json.writing"
        with self.fs.open_output_stream(staging) as stream:
            stream.write(manifest.encode())
        self.fs.move(staging, final)
        return final

    def delete(self, manifest: SnapshotManifest) -> None:
        """Delete ``manifest`` (first, so the snapshot is no longer used) and its own files;
        SST files it shares with others stay until ``prune``."""
        self._delete_file(self.path(manifest.processor, f"manifests/{manifest.id}.json"))
        folder = self.path(manifest.processor, f"snapshots/{manifest.id}")
        if self.fs.get_file_info(folder).type == pafs.FileType.Directory:
            self.fs.delete_dir(folder)

    def delete_processor(self, processor: int) -> None:
        """Delete every snapshot of ``processor`` (its state was rebuilt another way)."""
        folder = self.folder(processor)
        if self.fs.get_file_info(folder).type == pafs.FileType.Directory:
            self.fs.delete_dir(folder)

    def prune(self, processor: int, keep: int, pinned: frozenset[str] = frozenset()) -> int:
        """Keep processor ``processor``'s newest ``keep`` snapshots and those ``pinned`` (ids
        a scale in progress reads); delete the others and every file no kept snapshot uses.
        Returns how many files were deleted."""
        manifests = self.manifests(processor)
        newest = manifests[-keep:] if keep > 0 else []
        kept = [m for m in manifests if m in newest or m.id in pinned]
        for manifest in manifests:
            if manifest not in kept:
                self.delete(manifest)
        used = {self.path(processor, f.path) for m in kept for f in m.files}
        deleted = 0
        for info in self._list(self.path(processor, "files"), recursive=True):
            if info.type == pafs.FileType.File and info.path not in used:
                self._delete_file(info.path)
                deleted += 1
        kept_ids = {m.id for m in kept}
        for info in self._list(self.path(processor, "snapshots"), recursive=False):
            if info.base_name not in kept_ids:
                self.fs.delete_dir(info.path)
        return deleted

    def _delete_file(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.delete_file(path)

    def _list(self, folder: str, recursive: bool) -> list[pafs.FileInfo]:
        selector = pafs.FileSelector(folder, recursive=recursive, allow_not_found=True)
        infos: list[pafs.FileInfo] = self.fs.get_file_info(selector)
        return infos
