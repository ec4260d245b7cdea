"""Which partitions of a topic may hold a partition's keys, and up to which offset (pure).

A partition's keys at a count are one residue class of the key hash (linear hashing:
``h % m == p`` with ``m`` the level's modulus, doubled for a split bucket). Between two of its
boundaries a partition ``q`` holds the keys of the step in force there, so ``q`` may hold
records of ``p``'s keys exactly in the stretches where the two classes meet. Each ancestor on
``p``'s split path is listed too (bounded by the last marker that split the path off it),
as growth-only readers always read them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rebalance.linear_hash import ancestors, level

if TYPE_CHECKING:
    from rebalance.lineage import TopicHistory

__all__ = ["ReadRange", "key_class", "key_history"]


@dataclass(frozen=True, order=True)
class ReadRange:
    """Read ``partition`` of ``topic`` from its start up to ``end_offset`` (exclusive).

    ``end_offset`` is ``None`` when the range is open (read up to the handoff offset) or when
    the bound is not known yet.
    """

    topic: str
    partition: int
    end_offset: int | None = None


def key_class(partition: int, initial: int, count: int) -> tuple[int, int] | None:
    """``(residue, modulus)``: the key hashes ``h`` with ``h % modulus == residue`` are
    ``partition``'s keys among ``count`` partitions (``None``: it holds none)."""
    if partition >= count:
        return None
    low = initial << level(initial, count)
    split = partition < count - low or partition >= low
    return partition, low << 1 if split else low


def _meet(a: tuple[int, int] | None, b: tuple[int, int]) -> bool:
    if a is None:
        return False
    modulus = min(a[1], b[1])
    return a[0] % modulus == b[0] % modulus


def key_history(history: TopicHistory, partition: int) -> list[ReadRange]:
    """See ``TopicHistory.key_history``."""
    n, counts = history.initial_partitions, history.counts
    last = max(i for i, count in enumerate(counts) if partition < count)
    ref = key_class(partition, n, counts[last])
    assert ref is not None
    found: dict[int, tuple[tuple[int, int], int | None]] = {}
    for q in range(history.created):
        segments = _segments(history, q)
        holding = [
            k
            for k, (_, step, _) in enumerate(segments)
            if _meet(key_class(q, n, counts[step]), ref)
        ]
        if not holding:
            continue
        first, final = holding[0], holding[-1]
        end: int | None = None
        if final + 1 < len(segments):
            start, _, kind = segments[final + 1]
            end = start - 1 if kind in ("marker", "drain") else start
        found[q] = ((segments[first][1], q), end)
    for child, ancestor in itertools.pairwise([partition, *ancestors(partition, n)]):
        bound = history.thresholds.get(child)
        if ancestor in found:
            order, end = found[ancestor]
            found[ancestor] = (order, None if end is None or bound is None else max(end, bound))
        else:
            found[ancestor] = ((history.created_at(ancestor), ancestor), bound)
    own = found.pop(partition)
    ordered = sorted(found.items(), key=lambda item: item[1][0])
    ranges = [ReadRange(history.name, q, end) for q, (_, end) in ordered]
    ranges.append(ReadRange(history.name, partition, own[1]))
    return ranges


def _segments(history: TopicHistory, partition: int) -> list[tuple[int, int, str | None]]:
    """``(first offset, step in force, kind of the boundary that starts it)`` of each stretch
    of ``partition`` between boundaries where the step in force changes."""
    segments: list[tuple[int, int, str | None]] = [(0, 0, None)]
    latest = 0
    for boundary in history.boundaries(partition):
        if boundary.step <= latest:
            continue
        latest = boundary.step
        if boundary.offset == segments[-1][0]:
            segments[-1] = (boundary.offset, latest, boundary.kind)
        else:
            segments.append((boundary.offset, latest, boundary.kind))
    return segments
