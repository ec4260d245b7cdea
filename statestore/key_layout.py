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

#: stored forms remembered (cleared when full: cheaper than an LRU on every read)
_MEMO_ENTRIES = 100_000


class KeyLayout:
    """Stored keys of one app (its initial processor count ``initial``)."""

    __slots__ = ("initial", "memo")

    def __init__(self, initial: int) -> None:
        if initial < 1:
            raise ValueError(f"initial processor count must be at least 1, got {initial}")
        self.initial = initial
        #: stored forms of recent keys, by user key (a pure function of the key: never
        #: stale; read it before calling ``stored`` on a hot path)
        self.memo: dict[bytes, bytes] = {}

    def stored(self, key: bytes) -> bytes:
        """The stored form of user key ``key``."""
        stored = self.memo.get(key)
        if stored is None:
            stored = key_prefix(mmh3.hash(key, 0, False), self.initial) + key
            if len(self.memo) >= _MEMO_ENTRIES:
                self.memo.clear()
            self.memo[key] = stored
        return stored

    @staticmethod
    def user(stored: bytes) -> bytes:
        """The user key of a stored key."""
        return stored[PREFIX_BYTES:]

    def sorted_items(self, items: Iterable[tuple[bytes, Any]]) -> list[tuple[bytes, Any]]:
        """``(user key, value)`` pairs in stored order (what an SST run must be written in)."""
        stored = self.stored
        return sorted(items, key=lambda item: stored(item[0]))
