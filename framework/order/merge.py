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
(no tick is forced for them), and what a batch commits of it stays at its start. A partition
that holds no more items of any key (a shrink's deleted partition read up to its drain marker)
is ``close``-d: its ``R`` is ``ENDED``. An item added with ``wanted=False`` (a forced tick: an
errand) is not counted by ``wanted``: a reader forces ticks only while something else waits,
and for the least item waited for (``waited_for``: its blockers' ``needs`` release it with the
errands before it), not for an errand at the head (one tick per step of time). An input with no
partition assigned blocks every other input (its keys' items are unknown). With one input every
item is safe as soon as it is read: ``release`` gives every item read (each partition's in
offset order), so a single-input app needs no buffer.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Mapping, Sequence
from typing import Generic, TypeVar

from framework.order.canonical import Item
from framework.order.marks import LARGEST, NO_FLOOR
from framework.order.merge_parts import (
    Blocker,
    Blocking,
    PartitionRead,
    blockers_of,
    check_assign,
    errands_need,
    least_waited_for,
    raises_mark,
    safe_bounds,
)
from rebalance.positions import Position

__all__ = ["Blocker", "Blocking", "MergeBuffer"]

T = TypeVar("T")


class MergeBuffer(Generic[T]):
    """The items of the inputs ``inputs`` (topics in config order) read from the partitions
    assigned to it, released in each key's canonical order (module docstring)."""

    def __init__(self, inputs: Sequence[str]) -> None:
        if not inputs or len(set(inputs)) != len(inputs):
            raise ValueError(
                f"a merge buffer needs the app's input topics, each once, got {list(inputs)!r}. "
                "Fix: pass the input topics in config order."
            )
        self._inputs = tuple(inputs)
        self._index = {topic: index for index, topic in enumerate(inputs)}
        self._parts: dict[Position, PartitionRead[T]] = {}
        self._counts = [0] * len(inputs)
        #: per input, the heads of its non-empty FIFOs: (mark, rank, ident, partition)
        self._heads: list[list[tuple[int, int, int, PartitionRead[T]]]] = [[] for _ in inputs]
        #: per input, (R, ident, partition) for each partition's R, stale entries included
        self._reaches: list[list[tuple[int, int, PartitionRead[T]]]] = [[] for _ in inputs]
        self._idents = itertools.count()
        #: the items read and not released that a reader waits for (``add``'s ``wanted``)
        self._wanted = 0

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
        heads = self._heads[part.input]
        heads[:] = [entry for entry in heads if entry[3] is not part]
        heapq.heapify(heads)
        reaches = self._reaches[part.input]
        reaches[:] = [entry for entry in reaches if entry[2] is not part]
        heapq.heapify(reaches)
        self._wanted -= len(part.fifo) - len(part.errands)
        return list(part.fifo)

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
            heapq.heappush(self._heads[part.input], (item.mark, part.rank, part.ident, part))
        if raised or (end is not None and offset + 1 >= end):  # R moved
            self._push_reach(part)
            if raised:
                for child in part.children:  # (their R is at least this mark)
                    self._push_reach(child)
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

    def release(self) -> list[Item[T]]:
        """The items the rule lets go, in its order: the least head while it is safe."""
        bounds = self._bounds()
        heads = self._heads
        released: list[Item[T]] = []
        while True:
            best = self._least()
            if best < 0:
                return released
            heap = heads[best]
            bound = bounds[best]
            if bound is None or heap[0][0] > bound:
                return released
            part = heap[0][3]
            item = part.fifo.popleft()
            part.applied_mark = item.mark
            if part.errands and item.offset in part.errands:
                part.errands.discard(item.offset)
            else:
                self._wanted -= 1
            released.append(item)
            if part.fifo:
                heapq.heapreplace(heap, part.head())
            else:
                heapq.heappop(heap)

    def applied_positions(self) -> dict[Position, int]:
        """Per partition, the offset after its last released item (past what was read after
        it when nothing of it waits): what a batch that applied the released items commits."""
        return {
            position: (part.fifo[0].offset if part.fifo else part.read_to)
            if part.based
            else part.start
            for position, part in self._parts.items()
        }

    def applied_marks(self) -> dict[Position, int]:
        """Per partition whose base is known, its mark at ``applied_positions``: the base to
        resume from there."""
        return {position: part.applied_mark for position, part in self._parts.items() if part.based}

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

    def wanted(self) -> int:
        """How many items read and not released something waits for: all but those added
        with ``wanted=False``. A reader that forces ticks to release the least head forces
        none while this is 0 (the ticks it forces would only wait for one another)."""
        return self._wanted

    def pending(self, position: Position) -> int:
        """How many items of ``position`` were read and not released (its read-ahead)."""
        return len(self._part(position).fifo)

    def blocking(self, log_ends: Mapping[Position, int] | None = None) -> Blocking[T] | None:
        """The least head that is not safe and what blocks it (``None``: no head waits, or one
        is safe: ``release`` first); ``log_ends``: the partitions' log ends as last seen, for
        ``Blocker.caught_up``. After ``release`` a blocker has no item waiting."""
        input = self._least()
        if input < 0:
            return None
        mark, bound = self._heads[input][0][0], self._bounds()[input]
        if bound is not None and mark <= bound:
            return None
        return self._blocked(self._heads[input][0][3].fifo[0], input, NO_FLOOR - 1, log_ends)

    def waited_for(self, log_ends: Mapping[Position, int] | None = None) -> Blocking[T] | None:
        """The least item read and not released that something waits for (``wanted``: not an
        errand) and the partitions whose ``R`` is below the least that lets it go, with every
        item before it (errands: they go first), each with that least ``R`` as
        ``Blocker.needs``: a tick with that floor into each releases it. A partition of the
        item's own input blocks it only through an errand of another input before it.
        ``None``: nothing waits, or nothing but ``missing`` inputs could block it (``release``
        first); ``log_ends`` as for ``blocking``."""
        parts = self._parts.values()
        least = least_waited_for(parts)
        if least is None:
            return None
        item, input = least
        blocking = self._blocked(item, input, errands_need(parts, item.mark, input), log_ends)
        return blocking if blocking.blockers or blocking.missing else None

    def _blocked(
        self, item: Item[T], input: int, own: int, log_ends: Mapping[Position, int] | None
    ) -> Blocking[T]:
        """What blocks ``item`` of ``input`` (``own``: what its own input's partitions need)."""
        blockers = blockers_of(self._parts.values(), item.mark, input, own, log_ends)
        missing = tuple(t for j, t in enumerate(self._inputs) if j != input and not self._counts[j])
        return Blocking(item, blockers, missing)

    def _least(self) -> int:
        """The input of the least head by ``(mark, input)`` (-1: no item waits)."""
        best = -1
        best_mark = 0
        for input, heap in enumerate(self._heads):
            if heap and (best < 0 or heap[0][0] < best_mark):
                best, best_mark = input, heap[0][0]
        return best

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

    def _part(self, position: Position) -> PartitionRead[T]:
        part = self._parts.get(position)
        if part is None:
            raise ValueError(f"{position} is not assigned to this merge buffer. Fix: assign it.")
        return part

    def _push_reach(self, part: PartitionRead[T]) -> None:
        heap = self._reaches[part.input]
        heapq.heappush(heap, (part.reach(), part.ident, part))
        if len(heap) > 4 * self._counts[part.input] + 32:  # stale entries: rebuild
            parts = [p for p in self._parts.values() if p.input == part.input]
            heap[:] = [(p.reach(), p.ident, p) for p in parts]
            heapq.heapify(heap)

    def _low(self, input: int) -> int | None:
        """The least ``R`` of ``input``'s partitions (``None``: it has none)."""
        if not self._counts[input]:
            return None
        heap = self._reaches[input]
        while True:
            reach, _, part = heap[0]
            if part.reach() == reach:
                return reach
            heapq.heappop(heap)

    def _bounds(self) -> list[int | None]:
        """Per input, the largest mark of its heads that is safe (``None``: none is)."""
        return safe_bounds([self._low(input) for input in range(len(self._inputs))])
