"""The release rule of the merge buffer (``framework.order.merge``): the partitions it reads,
each with its FIFO, mark and ``R`` (``merge_parts.PartitionRead``), and what the rule lets go
(``release``), what a batch commits after it (``applied_positions``, ``applied_marks``) and
what blocks the least head or the least item waited for (``blocking``, ``waited_for``).
``MergeBuffer`` adds the reading of the partitions (assigning, adding items, links).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Mapping, Sequence
from typing import Generic, TypeVar

from framework.order.canonical import Item
from framework.order.marks import NO_FLOOR
from framework.order.merge_parts import (
    Blocking,
    PartitionRead,
    blockers_of,
    errands_need,
    least_waited_for,
    safe_bounds,
)
from rebalance.positions import Position

__all__ = ["MergeRelease"]

T = TypeVar("T")


class MergeRelease(Generic[T]):
    """The partitions of the inputs ``inputs`` (topics in config order) a merge buffer reads
    and the release rule over them (``framework.order.merge``'s docstring)."""

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

    def release(self, most: int | None = None) -> list[Item[T]]:
        """The items the rule lets go, in its order: the least head while it is safe (at most
        ``most``; the rest stay, released by a later call)."""
        bounds = self._bounds()
        heads = self._heads
        released: list[Item[T]] = []
        while most is None or len(released) < most:
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
        return released

    def applied_positions(self) -> dict[Position, int]:
        """Per partition, the offset after its last released item (past what was read after
        it when nothing of it waits): what a batch that applied the released items commits."""
        return {position: part.applied_position() for position, part in self._parts.items()}

    def applied_marks(self) -> dict[Position, int]:
        """Per partition whose base is known, its mark at ``applied_positions``: the base to
        resume from there."""
        return {position: part.applied_mark for position, part in self._parts.items() if part.based}

    def wanted(self) -> int:
        """How many items read and not released something waits for: all but those added
        with ``wanted=False``. A reader that forces ticks to release the least head forces
        none while this is 0 (the ticks it forces would only wait for one another)."""
        return self._wanted

    def pending(self, position: Position) -> int:
        """How many items of ``position`` were read and not released (its read-ahead)."""
        return len(self._part(position).fifo)

    def unapplied(self, position: Position) -> int:
        """How many items of ``position`` were read and not released: its FIFO's (``pending``)
        and, a shrink survivor's, those past its hold waiting unadded in its stash."""
        part = self._part(position)
        return len(part.fifo) + len(part.stash)

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
