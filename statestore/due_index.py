"""An in-memory index of the keys that have something due, over one store of due times.

The store (``DUE_STORE``, written by ``framework.time``) holds, per stored key, 16 bytes: the
earliest event-time and the earliest processing-time at which something of the key is due
(big-endian signed milliseconds; ``NEVER`` when nothing). A tick asks ``due`` for the keys
whose times have come instead of reading every key, and what it costs is what is due: the
due times are kept in two heaps (event, processing time) beside the entries, and an answer
reads only the heads that have come (an item a later write made stale is dropped when met;
the heaps are rebuilt when stale items outnumber the entries). The index follows every write
through the ``CachedBackend`` (staged batches included) and is rebuilt from the store (plus
the staged values) after anything it cannot follow: a range delete, an ingest, dropped staged
batches. It names exactly the keys whose stored due time has come.
"""

from __future__ import annotations

import base64
import heapq
import struct
from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = ["DUE_STORE", "NEVER", "DueIndex", "decode_due", "encode_due", "readable_due"]

#: the store of due times (a name users cannot declare: ``framework.app`` reserves the prefix)
DUE_STORE = "splitstate.due"
#: a due time that never comes
NEVER = (1 << 63) - 1
_PAIR = struct.Struct(">qq")
_NEVER_DUE = (NEVER, NEVER)


def encode_due(event: int, wall: int) -> bytes:
    """The stored form of a key's earliest event-time and processing-time due times."""
    return _PAIR.pack(event, wall)


def decode_due(raw: bytes) -> tuple[int, int]:
    """``(event, wall)`` of a stored due value; a value of another size is never due (a
    damaged one is not trusted to trigger anything: the key's own record says)."""
    if len(raw) != _PAIR.size:
        return NEVER, NEVER
    event, wall = _PAIR.unpack(raw)
    return int(event), int(wall)


def readable_due(raw: bytes) -> dict[str, Any]:
    """A stored due value for people (``state dump``): ``{"event": ms, "wall": ms}``, ``None``
    for never; a value of another size as ``{"unreadable": base64}``."""
    if len(raw) != _PAIR.size:
        return {"unreadable": base64.b64encode(raw).decode("ascii")}
    event, wall = decode_due(raw)
    return {"event": None if event == NEVER else event, "wall": None if wall == NEVER else wall}


#: stale heap items tolerated beyond the entries' own before the heaps are rebuilt
_SLACK = 1024
#: ``(due time, stored key)`` items of one kind of due time, a heap
_Heap = list[tuple[int, bytes]]


class DueIndex:
    """Stored key -> ``(event, wall)`` due times of one store, rebuilt when unsure."""

    def __init__(self, load: Callable[[], Iterator[tuple[bytes, bytes | None]]]) -> None:
        #: every ``(stored key, value)`` of the store as readers see it now (staged included)
        self._load = load
        self._entries: dict[bytes, tuple[int, int]] | None = None
        #: the entries' event and processing-time due times (not ``NEVER``), as heaps; an
        #: item whose key's entry holds another time now is stale
        self._heaps: tuple[_Heap, _Heap] = ([], [])

    def invalidate(self) -> None:
        """Forget everything: the next ``due`` reads the store again."""
        self._entries = None
        self._heaps = ([], [])

    def changed(self, items: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Follow writes of the store (``None``: deleted)."""
        entries = self._entries
        if entries is None:
            return
        events, walls = self._heaps
        get, push, unpack, size = entries.get, heapq.heappush, _PAIR.unpack, _PAIR.size
        for key, value in items:
            if value is None:
                entries.pop(key, None)  # (its heap items are stale now)
                continue
            due = unpack(value) if len(value) == size else _NEVER_DUE  # (``decode_due``)
            if get(key) == due:
                continue
            entries[key] = due
            if due[0] != NEVER:
                push(events, (due[0], key))
            if due[1] != NEVER:
                push(walls, (due[1], key))
        # (up to two items per entry are current: rebuilt once the stale ones outnumber the
        # entries, so each rebuild follows as many writes as it reads entries)
        if len(events) + len(walls) > 3 * len(entries) + _SLACK:
            self._rebuild(entries)

    def due(self, event_limit: int, wall_limit: int) -> list[bytes]:
        """The stored keys with an event-time due ``<= event_limit`` or a processing-time
        due ``<= wall_limit``, in stored order."""
        entries = self._entries
        if entries is None:
            entries = self._entries = {}
            for key, value in self._load():
                if value is not None:
                    entries[key] = decode_due(value)
            self._rebuild(entries)
        if event_limit >= NEVER or wall_limit >= NEVER:  # (``NEVER`` itself is no heap item)
            return sorted(
                key
                for key, (event, wall) in entries.items()
                if event <= event_limit or wall <= wall_limit
            )
        found: set[bytes] = set()
        for side, limit in ((0, event_limit), (1, wall_limit)):
            heap = self._heaps[side]
            kept: _Heap = []
            met: set[bytes] = set()
            while heap and heap[0][0] <= limit:
                item = heapq.heappop(heap)
                due, key = item
                current = entries.get(key)
                if current is None or current[side] != due or key in met:
                    continue  # stale (or the same item twice): dropped
                met.add(key)
                kept.append(item)
            for item in kept:
                heapq.heappush(heap, item)
            found |= met
        return sorted(found)

    def _rebuild(self, entries: dict[bytes, tuple[int, int]]) -> None:
        """The heaps of ``entries``, with no stale item."""
        events = [(event, key) for key, (event, _wall) in entries.items() if event != NEVER]
        walls = [(wall, key) for key, (_event, wall) in entries.items() if wall != NEVER]
        heapq.heapify(events)
        heapq.heapify(walls)
        self._heaps = (events, walls)
