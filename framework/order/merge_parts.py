"""The merge buffer's pieces (``framework.order.merge``): one partition as the merge reads it,
and what blocks the least head or the least item waited for."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from framework.order.canonical import Item
from framework.order.marks import ENDED, LARGEST, NO_FLOOR
from rebalance.positions import Position

__all__ = [
    "Blocker",
    "Blocking",
    "PartitionRead",
    "Stashed",
    "blockers_of",
    "check_assign",
    "errands_need",
    "least_waited_for",
    "raises_mark",
    "safe_bounds",
]

T = TypeVar("T")
#: an item read and not added yet (``PartitionRead.stash``): offset, key, event time, payload,
#: whether it is wanted
Stashed = tuple[int, bytes | None, int | None, T, bool]


@dataclass(frozen=True)
class Blocker:
    """A partition that blocks the least head: its mark ``R`` (``mark``), the least ``R`` that
    unblocks the head (``needs``: the floor a forced tick takes), its items read and not
    released (``pending``) and whether it is read up to the log end the caller gave."""

    position: Position
    mark: int
    needs: int
    pending: int
    caught_up: bool


@dataclass(frozen=True)
class Blocking(Generic[T]):
    """The least head that is not safe, the partitions that block it and the inputs with no
    partition assigned (``missing``; they block it too)."""

    head: Item[T]
    blockers: tuple[Blocker, ...]
    missing: tuple[str, ...]


class PartitionRead(Generic[T]):
    """One partition as the merge reads it: its FIFO of items read and not released, its mark
    and ``R`` (``reach``), its lineage (a growth child's parent while its base is not known)
    and what it committed (``applied_mark``)."""

    __slots__ = (
        "applied_mark",
        "based",
        "children",
        "closed",
        "end",
        "errands",
        "fifo",
        "floor",
        "hold",
        "hold_rank",
        "ident",
        "input",
        "lineage",
        "mark",
        "marker",
        "position",
        "rank",
        "read_to",
        "sources",
        "start",
        "stash",
        "survivors",
    )

    def __init__(
        self, position: Position, input: int, ident: int, *, start: int, base: int, rank: int
    ) -> None:
        self.position = position
        self.input = input
        self.rank = rank
        self.ident = ident
        self.mark = base
        self.start = start
        self.read_to = start  # every item before it was added
        #: whether its base is known (else nothing of it is released: ``MergeBuffer.base``)
        self.based = True
        self.end: int | None = None
        self.closed = False
        #: a growth child's parent while its base is not known (the parent is not read past
        #: ``marker`` yet; ``None``: the marker's offset is not known here), else ``None``; a
        #: parent's children waiting for their base
        self.lineage: PartitionRead[T] | None = None
        self.marker: int | None = 0
        self.children: list[PartitionRead[T]] = []
        self.fifo: deque[Item[T]] = deque()
        self.applied_mark = base
        #: the offsets of its items in the FIFO that nothing waits for (``add``'s ``wanted``)
        self.errands: set[int] = set()
        #: a shrink survivor's hold offset while its marks from there on are not known (its
        #: deleted partitions' final marks, ``sources``, not all known), else ``None``; from
        #: ``hold`` on its marks are at least ``floor`` and each source's final mark
        self.hold: int | None = None
        self.floor = NO_FLOOR
        #: a survivor's lineage rank from ``hold`` on (its items' there: the shrink's step)
        self.hold_rank = rank
        self.sources: list[PartitionRead[T]] = []
        #: a deleted partition's survivors waiting for its final mark
        self.survivors: list[PartitionRead[T]] = []
        #: a survivor's items read from ``hold`` on while ``sources`` remain, not added yet:
        #: ``(offset, key, event time, payload, wanted)``
        self.stash: deque[Stashed[T]] = deque()

    def reach(self) -> int:
        """``R``: every item of it not read yet, and while its base is not known every item
        it holds too (none of them is a head), has a mark at least this (``ENDED``: none
        comes and, if not based, it holds none)."""
        end = self.end
        held = self.fifo if not self.based else None
        if (self.closed or (end is not None and self.read_to >= end)) and not held:
            return ENDED
        # (not based: an item's mark is max(base, its own), at least its own; the least
        # held item's own mark bounds every item it holds or will read from below)
        reach = held[0].mark if held else self.mark
        lineage = self.lineage  # (its base, and so each of its marks, is at least this)
        if lineage is not None:
            reach = max(reach, lineage.mark)
        hold = self.hold  # (its marks from the hold on are at least each source's mark now)
        if hold is not None and self.read_to >= hold:
            reach = max(reach, self.floor, *(source.mark for source in self.sources))
        return reach

    def applied_position(self) -> int:
        """The offset after its last released item (past what was read after it when nothing
        of it waits; not past a survivor's hold while its marks from there are unknown; its
        start while its base is not known)."""
        if not self.based:
            return self.start
        if self.fifo:
            return self.fifo[0].offset
        hold = self.hold
        return self.read_to if hold is None else min(self.read_to, hold)

    def first_wanted(self) -> Item[T] | None:
        """The first item of its FIFO that something waits for (not an errand; ``None``: it
        holds none)."""
        errands = self.errands
        if len(errands) >= len(self.fifo):
            return None  # (every item it holds is an errand)
        return next(item for item in self.fifo if item.offset not in errands)

    def link(self, source: PartitionRead[T], marker: int | None) -> None:
        """Its parent is ``source`` (of its input), not read past ``marker`` (``None``: not
        known here): its base waits, and ``source``'s mark bounds its ``R`` till then."""
        if source.input != self.input:
            raise ValueError(f"{self.position}: parent {source.position} is of another input.")
        if marker is not None and source.read_to > marker:
            raise ValueError(
                f"{self.position}: its parent {source.position} is read past the marker at "
                f"{marker} already. Fix: assign the child before, or give its base."
            )
        self.lineage, self.marker, self.based = source, marker, False
        source.children.append(self)

    def unlink(self) -> None:
        """Its parent no longer bounds its ``R``."""
        if self.lineage is not None:
            self.lineage.children.remove(self)
            self.lineage = None

    def take_base(self, base: int) -> bool:
        """Take ``base`` (it was not based): its marks and its held items' are at least
        ``base`` from now on; whether it holds items (its head may be released)."""
        self.unlink()
        self.based = True
        self.mark = max(self.mark, base)
        self.applied_mark = max(self.applied_mark, base)  # (at its start: a restart's base)
        held = [item._replace(mark=max(item.mark, base)) for item in self.fifo]
        self.fifo.clear()
        self.fifo.extend(held)
        return bool(held)

    def head(self) -> tuple[int, int, int, PartitionRead[T]]:
        """Its FIFO's head as a heap entry: ``(mark, rank, ident, partition)`` (the head's
        rank: a survivor's items from its hold on have the shrink's)."""
        head = self.fifo[0]
        return head.mark, head.rank, self.ident, self


def check_assign(
    position: Position, start: int, base: int, inputs: Mapping[str, int], *, assigned: bool
) -> int:
    """The input index of ``position`` (``inputs``: each input's, in config order), or
    ``ValueError``: not of an input, ``assigned`` already, a negative ``start`` or a
    ``base`` that is not a mark."""
    input = inputs.get(position[0])
    if input is None:
        raise ValueError(
            f"{position[0]!r} is not an input of this merge buffer ({list(inputs)}). "
            "Fix: assign only partitions of the app's input topics."
        )
    if assigned:
        raise ValueError(f"{position} is assigned already. Fix: forget it first.")
    if start < 0:
        raise ValueError(f"{position}: start offset {start} is negative. Fix: give >= 0.")
    if not NO_FLOOR <= base <= LARGEST:
        raise ValueError(
            f"{position}: base mark {base} is outside {NO_FLOOR}..{LARGEST}. "
            "Fix: give the stored mark, or NO_FLOOR at the partition's first offset."
        )
    return input


def least_waited_for(parts: Iterable[PartitionRead[T]]) -> tuple[Item[T], int] | None:
    """The least item of ``parts`` that something waits for (not an errand; none of a
    partition whose base is not known), in the order of release (mark, input, rank), with its
    input (``None``: only errands wait)."""
    least: tuple[tuple[int, int, int, int], Item[T]] | None = None
    for part in parts:
        if not part.based:
            continue  # (it waits for its base, not for ticks)
        item = part.first_wanted()
        if item is not None:
            order = (item.mark, part.input, item.rank, part.ident)
            if least is None or order < least[0]:
                least = (order, item)
    return None if least is None else (least[1], least[0][1])


def errands_need(parts: Iterable[PartitionRead[T]], mark: int, input: int) -> int:
    """The least ``R`` a partition of ``input`` needs to let go the items of ``parts`` of other
    inputs before ``(mark, input)`` (errands, before the least item waited for; below
    ``NO_FLOOR``: none)."""
    need = NO_FLOOR - 1
    for part in parts:
        if part.input == input or not part.based:
            continue
        for item in part.fifo:
            if (item.mark, part.input) >= (mark, input):
                break
            need = max(need, item.mark if part.input < input else item.mark + 1)
    return need


def blockers_of(
    parts: Iterable[PartitionRead[T]],
    mark: int,
    input: int,
    own: int,
    log_ends: Mapping[Position, int] | None,
) -> tuple[Blocker, ...]:
    """The partitions of ``parts`` that block an item of ``mark`` of ``input``: of another
    input, ``R`` below what its rule needs (``R >= mark`` for a later input, ``R > mark`` for
    an earlier one); of its own input, ``R`` below ``own``. ``log_ends`` as
    ``MergeBuffer.blocking``'s."""
    blockers = []
    for part in parts:
        needs = own if part.input == input else (mark if part.input > input else mark + 1)
        reach = part.reach()
        if reach < needs:
            end = (log_ends or {}).get(part.position)
            caught_up = end is not None and part.read_to >= end
            blockers.append(Blocker(part.position, reach, needs, len(part.fifo), caught_up))
    return tuple(blockers)


def safe_bounds(lows: list[int | None]) -> list[int | None]:
    """Per input, the largest mark of its heads that is safe given each input's least ``R``
    (``lows``; ``None``: an input with no partition, which lets nothing of another pass)."""
    bounds: list[int | None] = []
    for input in range(len(lows)):
        bound = ENDED
        for other, low in enumerate(lows):
            if other == input:
                continue
            if low is None:
                break
            bound = min(bound, _limit(low, other > input))
        else:
            bounds.append(bound)
            continue
        bounds.append(None)
    return bounds


def raises_mark(position: Position, offset: int, event_time: int, mark: int) -> bool:
    """Whether an item's ``event_time`` raises its partition's ``mark`` (``ValueError``: it is
    not a time a mark holds)."""
    if event_time > LARGEST:
        raise ValueError(f"{position}@{offset}: event time {event_time} is above {LARGEST}.")
    if event_time < NO_FLOOR:
        raise ValueError(f"{position}@{offset}: event time {event_time} is below {NO_FLOOR}.")
    return event_time > mark


def _limit(low: int, later: bool) -> int:
    """The largest head mark an input whose least ``R`` is ``low`` lets pass: ``R >= m`` for a
    later input, ``R > m`` for an earlier one."""
    return low if later else low - 1
