"""Owner-only directories and files: what holds a processor's keys and values.

A processor's state directory, its checkpoints and snapshots, a restored or downloaded copy
and the SST files staged for a bulk load hold every stored key and value. splitstate creates
the directories that hold them ``0700`` and the files it writes itself ``0600``, whatever the
process umask. RocksDB creates its own files with the umask's modes (it has no setting for
them): the ``0700`` directory around them is what keeps other users out. A directory that
exists open to other users (made by an older splitstate, or by hand) is tightened when
splitstate uses it, and a warning says so.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

__all__ = [
    "DIRECTORY_MODE",
    "FILE_MODE",
    "made_private",
    "make_private_dirs",
    "open_private",
    "private_directory",
]

log = logging.getLogger(__name__)

#: the mode of a directory splitstate creates to hold state
DIRECTORY_MODE = 0o700
#: the mode of a file splitstate writes there itself
FILE_MODE = 0o600
_OTHERS = 0o077


def make_private_dirs(path: Path) -> bool:
    """Create ``path`` and its missing parents, each ``0700``; directories that exist are
    left as they are. Returns whether ``path`` was created."""
    missing: list[Path] = []
    current = path
    while not current.is_dir():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    made = False
    for directory in reversed(missing):
        try:
            directory.mkdir(DIRECTORY_MODE)
        except FileExistsError:
            if not directory.is_dir():
                raise
            continue  # another process made it meanwhile
        os.chmod(directory, DIRECTORY_MODE)  # the umask may have taken the owner's bits
        made = directory == path
    return made


def private_directory(path: Path, *, exist_ok: bool = True) -> Path:
    """``path`` as an owner-only directory: created ``0700`` (its missing parents too), or,
    when it exists, tightened if other users may enter or list it (a warning says so).
    ``exist_ok`` false: ``FileExistsError`` when it exists, as ``Path.mkdir`` says."""
    if make_private_dirs(path):
        return path
    if not exist_ok:
        raise FileExistsError(f"[Errno 17] File exists: '{path}'")
    _tighten(path)
    return path


def made_private(path: Path, make: Callable[[Path], None]) -> Path:
    """Create the new directory ``path`` with ``make(directory)`` (e.g. a RocksDB checkpoint,
    which makes it with the umask's modes) inside an owner-only staging directory beside it,
    then make it ``0700`` and move it to ``path``: no other user ever sees what it holds.
    Missing parents are made ``0700``."""
    staging = path.with_name(f".{path.name}.making-{os.getpid()}")
    make_private_dirs(path.parent)
    shutil.rmtree(staging, ignore_errors=True)  # our own leftover from a crash
    private_directory(staging, exist_ok=False)
    try:
        made = staging / "made"
        make(made)
        os.chmod(made, DIRECTORY_MODE)
        made.rename(path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return path


def open_private(path: Path) -> BinaryIO:
    """The new file ``path`` opened for writing bytes, ``0600`` before anything is written to
    it. It must not exist: ``FileExistsError`` also for a symbolic link there, which is never
    followed."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)  # the umask may have taken the owner's bits
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "wb")


def _tighten(path: Path) -> None:
    """Take group and other permissions off the existing directory ``path``, saying so."""
    mode = stat.S_IMODE(path.stat().st_mode)
    if not mode & _OTHERS:
        return
    try:
        os.chmod(path, mode & ~_OTHERS)
    except OSError as error:
        log.warning(
            "%s is open to other users (mode %04o) and could not be made owner-only (%s): "
            "they can read the state it holds. Fix: run splitstate as the directory's owner, "
            "or `chmod go= %s`",
            path,
            mode,
            error,
            path,
        )
        return
    log.warning(
        "%s was open to other users (mode %04o: made by an older splitstate, or by hand); it "
        "holds state, so it is now owner-only (mode %04o)",
        path,
        mode,
        mode & ~_OTHERS,
    )
