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

Whoever may write to the store may have written what is read back, so a manifest is used
only if it has the form splitstate writes (``SnapshotManifest.decode``) and the id of its
file's name, and what is deleted is built from such ids or listed in the processor's folder,
never reached through a symbolic link out of it. A local store is written owner-only
(``statestore.owner_only_fs``): directories ``0700``, files ``0600``.
"""

from __future__ import annotations

import contextlib
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING

from statestore.errors import StateStoreError, StoreCorruptError
from statestore.snapshot_manifest import SnapshotManifest
from statestore.snapshot_names import is_snapshot_id

if TYPE_CHECKING:  # pyarrow when a store is used: a processor without snapshots never does
    from pyarrow import fs as pafs

__all__ = ["SnapshotStore", "store_errors"]

log = logging.getLogger(__name__)
_PROCESSOR = re.compile(r"^processor-(\d+)$")


class SnapshotStore:
    """Where app ``app_id``'s processors keep their snapshots (``url``: a path or a URL).

    The URL may hold credentials: no message or ``repr`` of the store repeats it (the
    framework shows it through ``framework.redaction.mask_url``)."""

    def __init__(self, url: str, app_id: str) -> None:
        # pyarrow from here on, not at import (see the imports above)
        from pyarrow import fs as pafs  # noqa: PLC0415

        from statestore.owner_only_fs import owner_only_local  # noqa: PLC0415

        self.url = url
        self.app_id = app_id
        try:
            if "://" in url:
                filesystem, root = pafs.FileSystem.from_uri(url)
            else:
                filesystem, root = pafs.LocalFileSystem(), str(Path(url).expanduser().resolve())
            local = isinstance(filesystem, pafs.LocalFileSystem)
            if local:  # written owner-only
                filesystem = owner_only_local(f"{root.rstrip('/')}/{app_id}")
        except (ValueError, OSError) as error:
            reason = str(error).replace(url, "<snapshots.url>")  # pyarrow quotes it whole
            raise StateStoreError(
                f"snapshots.url cannot be used: {reason}. Fix: give a local "
                "directory or a URL pyarrow.fs reads (s3://bucket/prefix, gs://, hdfs://, "
                "file:///path), with its credentials in the environment."
            ) from None
        self.fs: pafs.FileSystem = filesystem
        #: a directory on this machine (it may hold symbolic links; an object store has none)
        self.local = local
        self.root = root.rstrip("/")

    def __repr__(self) -> str:
        kind = "local" if self.local else self.fs.type_name
        return f"SnapshotStore({kind}:{self.root!r}, {self.app_id!r})"

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
        from pyarrow import fs as pafs  # noqa: PLC0415 - see the import above

        found: list[SnapshotManifest] = []
        infos = self._list(self.path(processor, "manifests"), recursive=False)
        for info in sorted(infos, key=lambda i: i.base_name):
            if info.type != pafs.FileType.File or not _is_manifest_name(info.base_name):
                continue
            try:
                manifest = SnapshotManifest.decode(self.read(info.path), info.path)
            except (StoreCorruptError, FileNotFoundError) as error:
                log.warning("skipping snapshot %s: %s", info.path, error)
                continue
            if f"{manifest.id}.json" != info.base_name:
                log.warning(
                    "skipping snapshot %s: it names itself %r, not its file's name. It is not "
                    "one splitstate wrote. Fix: delete it, and check who may write to the "
                    "snapshot store.",
                    info.path,
                    manifest.id,
                )
            elif manifest.app_id == self.app_id and manifest.processor == processor:
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
        if not is_snapshot_id(manifest.id):  # never a path built from another id
            raise StoreCorruptError(
                f"snapshot {manifest.id!r:.120} is not deleted: its id is not one splitstate "
                "writes (<13 digits>-<8 hex>)."
            )
        self._delete_file(self.path(manifest.processor, f"manifests/{manifest.id}.json"))
        folder = self.path(manifest.processor, f"snapshots/{manifest.id}")
        if self._is_directory(folder):
            self.fs.delete_dir(folder)

    def delete_processor(self, processor: int) -> None:
        """Delete every snapshot of ``processor`` (its state was rebuilt another way)."""
        folder = self.folder(processor)
        if self._is_directory(folder):
            self.fs.delete_dir(folder)

    def prune(self, processor: int, keep: int, pinned: frozenset[str] = frozenset()) -> int:
        """Keep processor ``processor``'s newest ``keep`` snapshots and those ``pinned`` (ids
        a scale in progress reads); delete the others and every file no kept snapshot uses.
        Returns how many files were deleted."""
        from pyarrow import fs as pafs  # noqa: PLC0415 - see the import above

        manifests = self.manifests(processor)
        newest = manifests[-keep:] if keep > 0 else []
        kept = [m for m in manifests if m in newest or m.id in pinned]
        for manifest in manifests:
            if manifest not in kept:
                self.delete(manifest)
        used = {self.path(processor, f.path) for m in kept for f in m.files}
        deleted = 0
        files = self.path(processor, "files")
        for info in self._list(files, recursive=True):
            if info.type == pafs.FileType.File and info.path not in used:
                if not self._within(info.path, files):
                    log.warning(
                        "not deleting %s: a symbolic link in the snapshot store leads it "
                        "outside %s. Fix: remove that link from the store.",
                        info.path,
                        files,
                    )
                    continue
                self._delete_file(info.path)
                deleted += 1
        kept_ids = {m.id for m in kept}
        for info in self._list(self.path(processor, "snapshots"), recursive=False):
            if info.type == pafs.FileType.Directory and info.base_name not in kept_ids:
                self.fs.delete_dir(info.path)  # a link is deleted, not followed
        return deleted

    def _within(self, path: str, folder: str) -> bool:
        """Whether file ``path``, listed in ``folder`` (below the store's root), lies in it
        once symbolic links are followed (a local directory may hold links; an object store
        has none). Only the root is resolved: a link planted as ``folder`` itself, or one of
        its parents in the store, leads outside it."""
        if not self.local:
            return True
        root = Path(self.root)
        real_folder = root.resolve() / Path(folder).relative_to(root)
        return Path(path).parent.resolve().is_relative_to(real_folder)

    def _is_directory(self, path: str) -> bool:
        from pyarrow import fs as pafs  # noqa: PLC0415 - see the import above

        return bool(self.fs.get_file_info(path).type == pafs.FileType.Directory)

    def _delete_file(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.delete_file(path)

    def _list(self, folder: str, recursive: bool) -> list[pafs.FileInfo]:
        from pyarrow import fs as pafs  # noqa: PLC0415 - see the import above

        selector = pafs.FileSelector(folder, recursive=recursive, allow_not_found=True)
        infos: list[pafs.FileInfo] = self.fs.get_file_info(selector)
        return infos


def store_errors(*more: type[Exception]) -> tuple[type[Exception], ...]:
    """What a store's file system raises when it fails, ``OSError`` and pyarrow's
    ``ArrowException``, and ``more`` (for an ``except`` clause: pyarrow is imported when an
    error is being handled, not when a processor starts)."""
    from pyarrow import ArrowException  # noqa: PLC0415 - see the import above

    return (OSError, ArrowException, *more)


def _is_manifest_name(name: str) -> bool:
    """Whether ``name`` is a manifest's file name (``<snapshot id>.json``)."""
    return name.endswith(".json") and is_snapshot_id(name.removesuffix(".json"))
