"""Opening a checkpoint (a snapshot copied back) as a backend: a RocksDB directory, or the JSON
file an in-memory backend's checkpoint is (the simulation's processors keep memory stores)."""

from __future__ import annotations

from pathlib import Path

from statestore.backend import Backend
from statestore.memory import MEMORY_CHECKPOINT, MemoryBackend

__all__ = ["open_checkpoint", "save_checkpoint"]


def open_checkpoint(path: Path, read_only: bool = True) -> Backend:
    """The database in checkpoint directory ``path``."""
    if (path / MEMORY_CHECKPOINT).exists():
        return MemoryBackend.load(path)
    from statestore.rocks import RocksBackend  # noqa: PLC0415 - rocksdict only when used

    return RocksBackend(path, read_only=read_only)


def save_checkpoint(backend: Backend, path: Path) -> None:
    """Keep what was written to ``backend`` (opened with ``open_checkpoint(path, False)``)
    in ``path`` (RocksDB wrote it already; a memory checkpoint is rewritten), and close it."""
    if isinstance(backend, MemoryBackend):
        backend.dump(path)
    backend.close()
