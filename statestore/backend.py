"""The key-value contract every state backend keeps (RocksDB on disk, or memory).

Stores are named key spaces (RocksDB column families). ``write`` applies changes to several
stores atomically: after a crash either all of a write is there or none of it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Protocol

__all__ = ["Backend", "Changes", "RangeDeletes"]

#: store name -> ``(key, new value)`` pairs; a value of ``None`` deletes the key.
Changes = Mapping[str, Iterable[tuple[bytes, bytes | None]]]
#: store name -> ``[low, high)`` key ranges to delete
RangeDeletes = Mapping[str, Sequence[tuple[bytes, bytes]]]


class Backend(Protocol):
    """A set of named byte key-value stores with atomic multi-store writes."""

    def store_names(self) -> list[str]:
        """The stores that exist."""
        ...

    def create_store(self, name: str) -> None:
        """Create store ``name`` if it does not exist."""
        ...

    def get(self, store: str, key: bytes) -> bytes | None:
        """The value of ``key`` in ``store``, or ``None``."""
        ...

    def reader(self, store: str) -> Callable[[bytes], bytes | None]:
        """A fast ``get`` bound to ``store`` (for the per-record path)."""
        ...

    def write(self, changes: Changes, ranges: RangeDeletes | None = None) -> None:
        """Delete every key of ``ranges``, then apply ``changes``: all of it atomically."""
        ...

    def scan(
        self, store: str, start: bytes | None = None, end: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """Items of ``store`` with ``start <= key < end``, in key order."""
        ...

    def ingest(self, store: str, files: Sequence[Path]) -> None:
        """Bulk-load sorted SST files into ``store``; their keys override existing ones."""
        ...

    def checkpoint(self, path: Path) -> None:
        """Write a consistent copy of everything to ``path`` (a new directory)."""
        ...

    def approximate_size(self) -> int:
        """Bytes the state takes (estimated)."""
        ...

    def close(self) -> None:
        """Release the backend; further use is an error."""
        ...
