"""A snapshot store in a local directory, written owner-only.

pyarrow's ``LocalFileSystem`` creates directories and files with the umask's modes (its only
setting is ``use_mmap``), so a local store's snapshots -- every key and value of the state --
would be readable by every user of the machine. ``owner_only_local(top)`` is pyarrow's local
filesystem behind a ``pyarrow.fs.PyFileSystem`` handler that creates every directory ``0700``
and every file ``0600`` (``statestore.owner_only``), and before its first write makes ``top``
(the app's folder in the store) owner-only, tightening one an older splitstate left open.
Whoever may write the store may plant symbolic links in it: a file is written only in a folder
that lies below ``top`` once links are followed (``PermissionError`` otherwise), and a link
where the file goes is replaced by the file, never written through.
Reading, listing, moving and deleting are pyarrow's own; streams are pyarrow's native files.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pyarrow import NativeFile
from pyarrow import fs as pafs

from statestore.owner_only import DIRECTORY_MODE, FILE_MODE, make_private_dirs, private_directory

__all__ = ["OwnerOnlyLocalHandler", "owner_only_local"]


def owner_only_local(top: str) -> pafs.FileSystem:
    """The local filesystem, writing owner-only under ``top`` (see the module docstring)."""
    return pafs.PyFileSystem(OwnerOnlyLocalHandler(top))


class OwnerOnlyLocalHandler(pafs.FileSystemHandler):  # type: ignore[misc]  # pyarrow is untyped
    """``pyarrow.fs.LocalFileSystem``, creating directories ``0700`` and files ``0600``."""

    def __init__(self, top: str) -> None:
        self.top = top
        self._local = pafs.LocalFileSystem()
        self._top_private = False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OwnerOnlyLocalHandler) and other.top == self.top

    def __hash__(self) -> int:
        return hash(self.top)

    def __reduce__(self) -> tuple[Any, ...]:
        return (OwnerOnlyLocalHandler, (self.top,))

    def _before_writing(self) -> None:
        if not self._top_private:
            private_directory(Path(self.top))
            self._top_private = True

    def _inside(self, path: str) -> None:
        """Before writing file ``path``: ``PermissionError`` unless its folder lies below
        ``top`` once links are followed; a link at ``path`` itself is removed (it lies in
        the store), so the file is written in its place, not through it."""
        top = Path(self.top)
        real_top = top.parent.resolve() / top.name
        if not Path(path).parent.resolve().is_relative_to(real_top):
            raise PermissionError(
                f"not writing {path}: a symbolic link in the snapshot store leads its folder "
                f"outside the snapshot store ({top}). Fix: remove that link from the store, "
                "and check who may write to it."
            )
        if Path(path).is_symlink():
            os.unlink(path)

    def get_type_name(self) -> str:
        return "local-owner-only"

    def normalize_path(self, path: str) -> str:
        normalized: str = self._local.normalize_path(path)
        return normalized

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        infos: list[pafs.FileInfo] = self._local.get_file_info(paths)
        return infos

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        infos: list[pafs.FileInfo] = self._local.get_file_info(selector)
        return infos

    def create_dir(self, path: str, recursive: bool) -> None:
        self._before_writing()
        if recursive:
            make_private_dirs(Path(path))
            return
        try:
            os.mkdir(path, DIRECTORY_MODE)
        except FileExistsError:
            if not Path(path).is_dir():
                raise
            return
        os.chmod(path, DIRECTORY_MODE)

    def delete_dir(self, path: str) -> None:
        self._local.delete_dir(path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self._local.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self) -> None:
        raise PermissionError("the snapshot store never empties the machine's root directory")

    def delete_file(self, path: str) -> None:
        self._local.delete_file(path)

    def move(self, src: str, dest: str) -> None:
        self._before_writing()
        self._local.move(src, dest)

    def copy_file(self, src: str, dest: str) -> None:
        self._before_writing()
        self._inside(dest)
        self._local.copy_file(src, dest)
        os.chmod(dest, FILE_MODE)

    def open_input_stream(self, path: str) -> NativeFile:
        return self._local.open_input_stream(path, compression=None)

    def open_input_file(self, path: str) -> NativeFile:
        return self._local.open_input_file(path)

    def open_output_stream(self, path: str, metadata: Any) -> NativeFile:
        self._before_writing()
        self._inside(path)
        _create_private(path, truncate=True)
        return self._local.open_output_stream(path, compression=None, metadata=metadata)

    def open_append_stream(self, path: str, metadata: Any) -> NativeFile:
        self._before_writing()
        self._inside(path)
        _create_private(path, truncate=False)
        return self._local.open_append_stream(path, compression=None, metadata=metadata)


def _create_private(path: str, *, truncate: bool) -> None:
    """Create ``path`` ``0600`` (emptied when ``truncate``), so pyarrow opens it as it is."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_TRUNC if truncate else 0)
    fd = os.open(path, flags, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
