"""The live merge buffer: items of several inputs released in their keys' canonical order.

A processor reads every partition of every input it owns, as fetched, and ``add``s each item
in its partition's offset order. Per partition the buffer keeps ``R``, the mark of the last
item read (read-ahead included; ``ENDED`` once a reader with an end has read up to it), and a
FIFO of items read and not yet released. The head ``x`` of a FIFO (input ``i``, mark ``m``)
is **safe** when for every partition ``Q`` of every *other* input ``j``: ``R(Q) >= m`` if
``j > i``, ``R(Q) > m`` if ``j < i``. ``release`` gives, repeatedly, the **least** head by
``(m, i)`` (then lineage rank) while it is safe; never a later item of a FIFO before its head.
Then the items released, restricted to any key, are a prefix of its canonical order
(``framework.order.canonical``): a key's item that canonically precedes a released ``x`` was
either read, and then the head of its FIFO was less than ``x``, so released first; or not read,
and then its mark is at least ``R`` of its partition, too large to precede ``x``. (Releasing a
safe head while a lesser one waits is not safe: the lesser one may be blocked by a partition of
``x``'s own input that ``x``'s rule does not look at, and still precede ``x`` for a key.)

What a batch commits is ``applied_positions`` (per partition, the offset after the last
released item, or past what was read after it when nothing waits) with ``applied_marks``;
a reader that resumes there, with those marks as bases, goes on with the same order. A reader
with an end at a committed prefix (catch-up, rebuild) ``end``s its partitions there: it never
waits. A live reader whose least head stays blocked asks ``blocking`` which partitions block
it; writing a tick with ``floor`` = ``Blocker.needs`` to each (recorded, read back like any
tick) releases it.

The partitions of an input hold disjoint keys, except a growth child, which holds keys of its
parent: ``assign`` it (with its parent's mark at the marker as base, a higher ``rank``) before
``forget``ting the parent, only once the parent was read up to the marker; or, before the
parent is read past the marker, with ``parent``: the buffer then takes the parent's mark there
as the child's base, and until then the parent's mark bounds the child's ``R`` from below (all
the child's marks are at least its base). A child whose base is not known is held until
``base`` gives it (``based=False``, or ``parent``): none of its items is released or waited for
(no tick is forced for them), and what a batch commits of it stays at its start; its ``R`` is
then at most the least held item's own mark (their marks, max(base, own), are at least it),
even once ended or closed. A partition that holds no more items of any key (a shrink's
deleted partition read up to its drain marker) is ``close``-d: its ``R`` is ``ENDED`` (once
based, for a child whose base is not known). A shrink's survivor is linked (``merging``) to its
deleted partitions read here: its marks from its hold on are at least their final marks
(``framework.order.survivor_links``). An item added with ``wanted=False`` (a forced tick: an
errand) is not counted by ``wanted``: a reader forces ticks only while something else waits,
and for the least item waited for (``waited_for``: its blockers' ``needs`` release it with the
errands before it), not for an errand at the head (one tick per step of time). An input with no
partition assigned blocks every other input (its keys' items are unknown). With one input every
item is safe as soon as it is read: ``release`` gives every item read (each partition's in
offset order), so a single-input app needs no buffer.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import TypeVar

from framework.order.canonical import Item
from framework.order.marks import LARGEST, NO_FLOOR
from framework.order.merge_parts import (
    Blocker,
    Blocking,
    PartitionRead,
    check_assign,
    raises_mark,
)
from framework.order.merge_release import MergeRelease
from framework.order.survivor_links import (
    detach,
    link,
    resolve,
    stash_or_raise,
    stashed_items,
    unlink,
)
from rebalance.positions import Position

__all__ = ["Blocker", "Blocking", "MergeBuffer"]

T = TypeVar("T")


class MergeBuffer(MergeRelease[T]):
    """The items of the inputs ``inputs`` (topics in config order) read from the partitions
    assigned to it, released in each key's canonical order (module docstring)."""

    def assign(
        self,
        position: Position,
        start: int,
        base: int = NO_FLOOR,
        rank: int = 0,
        *,
        parent: tuple[Position, int | None] | None = None,
        based: bool = True,
    ) -> None:
        """Read ``position`` from offset ``start``, whose mark there is ``base`` (``NO_FLOOR``
        at the partition's first offset, the stored mark on resuming, a growth child's parent's
        mark at the marker); ``rank``: its place in its keys' lineage (a growth child's is
        higher than its parent's). ``parent``: ``(its parent, the marker's offset there)`` of
        a growth child read from its life's start while the parent, assigned here, is not
        read past the marker yet: its base is then the larger of ``base`` and the parent's
        mark at the marker, and until the parent is read past it the parent's mark bounds the
        child's ``R`` from below (a gate-held child does not hold the other inputs back
        below its parent); the marker's offset ``None``: not known here. ``based=False`` (or
        ``parent``): ``base`` gives its base later (nothing of it is released until then)."""
        input = check_assign(position, start, base, self._index, assigned=position in self._parts)
        part: PartitionRead[T] = PartitionRead(
            position, input, next(self._idents), start=start, base=base, rank=rank
        )
        part.based = based and parent is None
        if parent is not None:
            part.link(self._part(parent[0]), parent[1])
        self._parts[position] = part
        self._counts[input] += 1
        self._push_reach(part)

    def forget(self, position: Position) -> list[Item[T]]:
        """Stop reading ``position`` (revoked, or a growth parent replaced by its children):
        the items read and not released, which a next reader reads again."""
        part = self._part(position)
        del self._parts[position]
        self._counts[part.input] -= 1
        part.unlink()
        for child in part.children:  # (their base unknown here: they wait for ``base``)
            child.lineage = None
            self._push_reach(child)
        part.children = []
        for survivor in detach(part):  # (its final mark unknown here: the others' only)
            self._unlink(survivor, part, NO_FLOOR)
        heads = self._heads[part.input]
        heads[:] = [entry for entry in heads if entry[3] is not part]
        heapq.heapify(heads)
        reaches = self._reaches[part.input]
        reaches[:] = [entry for entry in reaches if entry[2] is not part]
        heapq.heapify(reaches)
        self._wanted -= len(part.fifo) - len(part.errands)
        return [*part.fifo, *stashed_items(part)]

    def add(
        self,
        position: Position,
        offset: int,
        key: bytes | None,
        event_time: int | None,
        payload: T,
        *,
        wanted: bool = True,
    ) -> None:
        """The item at ``offset`` of ``position``, read after every earlier item there: a record
        of ``key`` with ``event_time`` (``None``: it has none), or a tick of the app (``key``
        ``None``, ``event_time`` its floor). ``wanted=False``: nothing waits for the item
        itself (a tick written only to release others, another app's tick): ``wanted``
        does not count it."""
        part = self._parts.get(position)
        if part is None:
            part = self._part(position)
        if offset < part.read_to:
            raise ValueError(
                f"{position}: offset {offset} was read already (next is {part.read_to}). "
                "Fix: add each partition's items once, in offset order (forget and assign "
                "it again to read it again)."
            )
        end = part.end
        if end is not None and offset >= end:
            raise ValueError(
                f"{position}: offset {offset} is past its end {end}. "
                "Fix: read up to the end only, or lift it (end(position, None))."
            )
        if part.hold is not None:  # (a survivor: its marks from the hold on known yet?)
            stashed = stash_or_raise(part, offset, (offset, key, event_time, payload, wanted))
            self._push_reach(part)
            if stashed:
                return
        self._append(part, offset, key, event_time, payload, wanted=wanted)

    def _append(
        self,
        part: PartitionRead[T],
        offset: int,
        key: bytes | None,
        event_time: int | None,
        payload: T,
        *,
        wanted: bool,
    ) -> None:
        """Add the item at ``offset`` of ``part`` (``add``'s checks passed)."""
        position, end = part.position, part.end
        if part.children:
            self._found_bases(part, offset)
        raised = False
        if event_time is not None and raises_mark(position, offset, event_time, part.mark):
            part.mark, raised = event_time, True
        part.read_to = offset + 1
        item = Item(position, offset, key, event_time, part.mark, part.input, part.rank, payload)
        fifo = part.fifo
        fifo.append(item)
        if wanted:
            self._wanted += 1
        else:
            part.errands.add(offset)
        if len(fifo) == 1 and part.based:
            heapq.heappush(self._heads[part.input], part.head())
        if raised or (end is not None and offset + 1 >= end):  # R moved
            self._push_reach(part)
            if raised:
                for child in part.children:  # (their R is at least this mark)
                    self._push_reach(child)
                for survivor in part.survivors:
                    self._push_reach(survivor)
        if part.children:
            self._found_bases(part, offset + 1)

    def passed(self, position: Position, offset: int) -> None:
        """The reader's position in ``position`` is ``offset``: every item before it was added
        (what lies between is not an item: another app's tick, a transaction marker)."""
        part = self._part(position)
        if offset <= part.read_to:
            return
        if part.end is not None and offset > part.end:
            raise ValueError(
                f"{position}: position {offset} is past its end {part.end}. "
                "Fix: read up to the end only."
            )
        was = part.reach()
        if part.children:
            self._found_bases(part, offset)
        part.read_to = offset
        if part.reach() != was:
            self._push_reach(part)
        if part.hold is not None and not part.sources:
            self._resolve(part)

    def end(self, position: Position, offset: int | None) -> None:
        """A reader with an end reads ``position`` up to ``offset`` (a committed position): once
        every item before it was added, its ``R`` is ``ENDED``. ``None`` lifts the end (the
        reader goes on live past it)."""
        part = self._part(position)
        if offset is not None and offset < part.read_to:
            raise ValueError(
                f"{position}: end {offset} is before what was read (up to {part.read_to}). "
                "Fix: end a partition at or after its reader's position."
            )
        was = part.reach()
        part.end = offset
        if part.reach() != was:
            self._push_reach(part)

    def close(self, position: Position) -> None:
        """No item of a key comes from ``position`` after what was read (a shrink's deleted
        partition read past its drain marker): its ``R`` is ``ENDED``, it blocks no other
        partition. Its items read stay in its FIFO, and what is read from it later (another
        app's tick) is still added (with its last mark)."""
        part = self._part(position)
        if not part.closed:
            part.closed = True
            self._push_reach(part)
            for survivor in list(part.survivors):  # (its final mark: theirs from the hold)
                self._unlink(survivor, part, part.mark)

    def merging(
        self,
        survivor: Position,
        hold: int,
        deleted: Sequence[Position],
        floor: int = NO_FLOOR,
        rank: int | None = None,
    ) -> None:
        """``survivor`` takes the keys of the shrink's ``deleted`` partitions from offset
        ``hold`` on (not read past it yet): its marks from there on are at least ``floor``
        (the final marks of deleted partitions not read here, as recorded) and the final mark
        of each of ``deleted`` (assigned here), its mark when it is ``close``-d. Until each
        is closed the survivor's items from ``hold`` on wait unadded (their marks are not
        known) and its ``R`` there is at least their marks now; one ``forget``-ten gives
        nothing (its final mark is not known here). ``rank``: its lineage rank from ``hold``
        on (the shrink's step, above the deleted partitions': a key's item there comes after
        its items of the same mark in them; ``None``: its rank as assigned)."""
        part = self._part(survivor)
        link(part, hold, [self._part(position) for position in deleted], floor, rank)
        self._push_reach(part)
        if not part.sources:
            self._resolve(part)

    def base(self, position: Position, base: int) -> None:
        """``position``'s base is ``base`` (a growth child's parent's mark at the marker): its
        items held so far take it into their marks and may be released (once based: kept)."""
        part = self._part(position)
        if not NO_FLOOR <= base <= LARGEST:
            raise ValueError(f"{position}: base mark {base} is outside {NO_FLOOR}..{LARGEST}.")
        if not part.based:
            self._set_base(part, base)

    def unlink(self, position: Position) -> None:
        """``position``'s parent no longer bounds its ``R`` (read past the child's marker
        while its own base is not known: ``base`` gives the child's later)."""
        part = self._part(position)
        part.unlink()
        self._push_reach(part)

    def based(self, position: Position) -> bool:
        """Whether ``position``'s base is known (``assign``'s ``based``, then ``base``)."""
        return self._part(position).based

    def mark(self, position: Position) -> int:
        """``position``'s mark after the last item read (of its own items, while not based)."""
        return self._part(position).mark

    def _found_bases(self, part: PartitionRead[T], read_to: int) -> None:
        """``part`` is read up to ``read_to`` (every item before it added) with its mark
        now: each child whose marker lies before ``read_to`` takes that mark as its base."""
        if not part.based:
            return  # (its mark is not final: its children's bases come from ``base``)
        for child in [c for c in part.children if c.marker is not None and c.marker < read_to]:
            self._set_base(child, part.mark)

    def _set_base(self, part: PartitionRead[T], base: int) -> None:
        """``part`` (not based) takes ``base``: its held items' marks, its head released."""
        if part.take_base(base):
            heapq.heappush(self._heads[part.input], part.head())
        self._push_reach(part)

    def _unlink(self, survivor: PartitionRead[T], source: PartitionRead[T], mark: int) -> None:
        """``source`` no longer holds ``survivor``'s marks back: its final mark is ``mark``."""
        if unlink(survivor, source, mark):
            self._resolve(survivor)
        self._push_reach(survivor)

    def _resolve(self, part: PartitionRead[T]) -> None:
        """``part``'s marks from its hold on are known: add the items that waited for them."""
        stash = resolve(part)
        if stash:
            read_to, part.read_to = part.read_to, stash[0][0]
            for offset, key, event_time, payload, wanted in stash:
                self._append(part, offset, key, event_time, payload, wanted=wanted)
            part.read_to = read_to
        self._push_reach(part)
