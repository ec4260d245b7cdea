"""A shrink survivor's link to the deleted partitions that merge into it, as the merge buffer
(``framework.order.merge``) reads them.

A survivor takes its deleted partitions' keys from its hold offset on, and its marks from
there on are at least their final marks (``framework.order.marks``): the final mark of each
deleted partition read by the same buffer (its mark when ``close``-d: read past its drain
marker), and a ``floor`` the reader knows otherwise (the stored mark of one drained before).
Until each linked one is closed, the survivor's items from its hold on wait unadded in its
``stash`` (their marks are not known), and its ``R`` there is at least their marks now
(``PartitionRead.reach``): a survivor its gate holds does not hold the other inputs back
below them. A linked partition forgotten before it is closed gives nothing (its final mark
is not known here).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import TypeVar

from framework.order.canonical import Item
from framework.order.merge_parts import PartitionRead, Stashed

__all__ = ["detach", "link", "resolve", "stash_or_raise", "stashed_items", "unlink"]

T = TypeVar("T")


def link(
    part: PartitionRead[T],
    hold: int,
    sources: Sequence[PartitionRead[T]],
    floor: int,
    rank: int | None = None,
) -> None:
    """Link survivor ``part`` (not read past ``hold``) to the deleted ``sources``, its marks
    from ``hold`` on at least ``floor`` too, its lineage rank from there on ``rank`` (the
    shrink's step: above the deleted partitions'; ``None``: its own). One read past a hold
    still linked keeps that link (its items from there on wait in its stash: none read later
    may overtake them); a later hold is not linked then."""
    if part.hold is not None and part.read_to > part.hold:
        return
    if part.read_to > hold:
        raise ValueError(
            f"{part.position}: read past its hold at {hold} already ({part.read_to}). "
            "Fix: link a survivor before reading it past its hold."
        )
    part.hold, part.floor = hold, max(part.floor, floor)
    part.hold_rank = part.rank if rank is None else max(part.rank, rank)
    for source in sources:
        if source.closed:
            part.floor = max(part.floor, source.mark)
        elif part not in source.survivors:
            source.survivors.append(part)
            part.sources.append(source)


def unlink(survivor: PartitionRead[T], source: PartitionRead[T], mark: int) -> bool:
    """``source``'s final mark is ``mark`` (``NO_FLOOR``: unknown); whether no linked source
    remains (then ``resolve``)."""
    survivor.sources.remove(source)
    survivor.floor = max(survivor.floor, mark)
    return not survivor.sources


def detach(part: PartitionRead[T]) -> list[PartitionRead[T]]:
    """``part`` is forgotten: unlink it from its sources; the survivors it was a source of
    (``unlink`` each)."""
    for source in part.sources:
        source.survivors.remove(part)
    part.sources = []
    survivors, part.survivors = part.survivors, []
    return survivors


def stash_or_raise(
    part: PartitionRead[T],
    offset: int,
    item: Stashed[T],
) -> bool:
    """The item at ``offset`` of survivor ``part`` is read: whether it waits unadded (in its
    stash: its mark is not known yet); else, at or past the hold, the mark is raised to the
    floor first."""
    hold = part.hold
    if hold is None or offset < hold:
        return False
    if part.sources:
        part.stash.append(item)
        part.read_to = offset + 1
        return True
    part.mark, part.hold, part.rank = max(part.mark, part.floor), None, part.hold_rank
    return False


def resolve(part: PartitionRead[T]) -> deque[Stashed[T]] | None:
    """``part``'s linked sources are all closed: if it is read up to its hold, raise its mark
    to the floor and return the items to add now (``None``: not read up to the hold; raised
    when its item there is added)."""
    hold = part.hold
    if hold is None or part.read_to < hold:
        return None
    part.mark, part.hold, part.rank = max(part.mark, part.floor), None, part.hold_rank
    if not part.fifo and not part.stash:
        part.applied_mark = max(part.applied_mark, part.mark)  # (committed past the hold)
    stash, part.stash = part.stash, deque()
    return stash


def stashed_items(part: PartitionRead[T]) -> list[Item[T]]:
    """The items ``part`` read and did not add (their marks not known: its mark now; their
    rank: the one from its hold on)."""
    return [
        Item(part.position, offset, key, time, part.mark, part.input, part.hold_rank, payload)
        for offset, key, time, payload, _ in part.stash
    ]
