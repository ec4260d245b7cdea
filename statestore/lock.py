"""An exclusive lock on a state directory, naming the process that holds it.

``flock`` on ``<dir>.lock``: the kernel releases it when the holder exits, however it exits
(a SIGKILLed processor leaves no stale lock). The holder writes its pid and command line into
the file so that a second opener can say who has it.
"""

from __future__ import annotations

import fcntl
import os
import sys
from pathlib import Path

from statestore.errors import StoreLockedError
from statestore.owner_only import make_private_dirs

__all__ = ["DirectoryLock"]


class DirectoryLock:
    """Hold ``path.lock`` exclusively until ``release``."""

    def __init__(self, path: Path) -> None:
        self.lock_file = path.with_name(path.name + ".lock")
        make_private_dirs(self.lock_file.parent)
        handle = self.lock_file.open("a+")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "an unknown process"
            handle.close()
            raise StoreLockedError(
                f"state directory {path} is in use by {holder}. Fix: stop that processor "
                "first (each processor id runs once), or use another state directory."
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"process {os.getpid()} ({' '.join(sys.argv)[:200]})\n")
        handle.flush()
        self._handle = handle

    def release(self) -> None:
        """Let go of the lock (closing the file releases the flock)."""
        if not self._handle.closed:
            self._handle.close()
