"""Opening a checkpoint (a snapshot copied back) as a backend: a RocksDB directory, or the JSON
file an in-memory backend's checkpoint is (the simulation's processors keep memory stores)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from statestore.backend import Backend
from statestore.memory import MEMORY_CHECKPOINT, MemoryBackend

__all__ = ["open_checkpoint", "save_checkpoint", "scan_ranges"]


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


def scan_ranges(
    backend: Backend, store: str, ranges: Sequence[tuple[bytes, bytes]], after: bytes | None
) -> Iterator[tuple[bytes, bytes]]:
    """Items of ``store`` within the sorted, disjoint key ``ranges``, in key order, from the
    first key past ``after`` (``None``: from the start): a scan resumed where one stopped."""
    for low, high in ranges:
        if after is not None and after >= high:
            continue
        start = low if after is None or after < low else after + b"\x00"
        yield from backend.scan(store, start, high)
