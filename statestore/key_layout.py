"""How user keys are stored: behind an 8-byte prefix that makes every bucket one key range.

A stored key is ``key_prefix(key_hash(key), B) + key`` (``rebalance.key_ranges``), with ``B``
the app's initial processor count. Stores are therefore ordered by linear-hash bucket at every
processor count: the keys a scale moves are a few contiguous ranges, which a purge deletes
with range deletes and a transfer reads with range scans, without touching the other keys.
Users never see the prefix: reads, writes, dumps and bulk loads take and give plain keys.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import mmh3

from rebalance.key_ranges import PREFIX_BYTES, KeyRange, key_prefix

__all__ = ["KeyLayout", "KeyRange"]


class KeyLayout:
    """Stored keys of one app (its initial processor count ``initial``)."""

    __slots__ = ("initial",)

    def __init__(self, initial: int) -> None:
        if initial < 1:
            raise ValueError(f"initial processor count must be at least 1, got {initial}")
        self.initial = initial

    def stored(self, key: bytes) -> bytes:
        """The stored form of user key ``key``."""
        return key_prefix(mmh3.hash(key, 0, False), self.initial) + key

    @staticmethod
    def user(stored: bytes) -> bytes:
        """The user key of a stored key."""
        return stored[PREFIX_BYTES:]

    def sorted_items(self, items: Iterable[tuple[bytes, Any]]) -> list[tuple[bytes, Any]]:
        """``(user key, value)`` pairs in stored order (what an SST run must be written in)."""
        stored = self.stored
        return sorted(items, key=lambda item: stored(item[0]))
