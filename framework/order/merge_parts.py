"""The merge buffer's pieces (``framework.order.merge``): one partition as the merge reads it,
and what blocks the least head."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Generic, TypeVar

from framework.order.canonical import Item
from framework.order.marks import ENDED
from rebalance.positions import Position

__all__ = ["Blocker", "Blocking", "PartitionRead"]

T = TypeVar("T")


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
        "children",
        "closed",
        "end",
        "errands",
        "fifo",
        "ident",
        "input",
        "lineage",
        "mark",
        "marker",
        "position",
        "rank",
        "read_to",
    )

    def __init__(
        self, position: Position, input: int, ident: int, *, start: int, base: int, rank: int
    ) -> None:
        self.position = position
        self.input = input
        self.rank = rank
        self.ident = ident
        self.mark = base
        self.read_to = start  # every item before it was added
        self.end: int | None = None
        self.closed = False
        #: a growth child's parent while its base is not known (the parent is not read past
        #: ``marker`` yet), else ``None``; a parent's children waiting for their base
        self.lineage: PartitionRead[T] | None = None
        self.marker = 0
        self.children: list[PartitionRead[T]] = []
        self.fifo: deque[Item[T]] = deque()
        self.applied_mark = base
        #: the offsets of its items in the FIFO that nothing waits for (``add``'s ``wanted``)
        self.errands: set[int] = set()

    def reach(self) -> int:
        """``R``: every item of it not read yet has a mark at least this (``ENDED``: none
        comes)."""
        end = self.end
        if self.closed or (end is not None and self.read_to >= end):
            return ENDED
        lineage = self.lineage  # (its base, and so each of its marks, is at least this)
        return self.mark if lineage is None else max(self.mark, lineage.mark)

    def first_wanted(self) -> Item[T] | None:
        """The first item of its FIFO that something waits for (not an errand; ``None``: it
        holds none)."""
        errands = self.errands
        if len(errands) >= len(self.fifo):
            return None  # (every item it holds is an errand)
        return next(item for item in self.fifo if item.offset not in errands)

    def head(self) -> tuple[int, int, int, PartitionRead[T]]:
        """Its FIFO's head as a heap entry: ``(mark, rank, ident, partition)``."""
        return self.fifo[0].mark, self.rank, self.ident, self
