"""The steps of an input topic's partition-count history (pure): growths and shrinks.

Every change of a topic's partition count after the first is a *step*: a :class:`Grow`
(count up: partitions split off their parents) or a :class:`Shrink` (count down: the highest
partitions are *deleted*, their keys merge back into their *survivors*). Kafka never removes a
partition, so a deleted partition is still read, and a later growth re-uses it: its offsets go
on, each stretch between its creation and its deletion is one *life*.

Each step puts *boundaries* in the partitions it touches: the first offset of a partition
placed with the step's count (see :class:`Boundary`). A boundary that is not recorded yet
(a marker not written) is "not reached": the earlier step is in force there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from rebalance.linear_hash import ancestors

__all__ = [
    "Boundary",
    "BoundaryKind",
    "Grow",
    "PartitionGate",
    "Shrink",
    "Step",
    "survivor",
]

#: ``marker``: ``p`` is the parent of a grown child (first offset after its marker);
#: ``start``: ``p`` is grown, a new life starts; ``hold``: ``p`` survives a shrink and takes
#: deleted partitions' keys; ``drain``: ``p`` is deleted (first offset after its drain marker).
BoundaryKind = Literal["marker", "start", "hold", "drain"]


@dataclass(frozen=True)
class Grow:
    """A growth to ``count`` partitions.

    ``starts``: each grown ``c`` in ``range(previous count, count)`` -> the first offset of
    its new life (its end offset measured before the count was recorded; 0 for a partition
    Kafka just created). ``markers``: ``c`` -> the offset of ``c``'s marker in
    ``parent(c, N)``, absent while not recorded.
    """

    count: int
    starts: Mapping[int, int]
    markers: Mapping[int, int] = field(default_factory=dict)

    @property
    def kind(self) -> Literal["grow"]:
        """``"grow"``."""
        return "grow"


@dataclass(frozen=True)
class Shrink:
    """A shrink to ``count`` partitions: ``range(count, previous count)`` are deleted.

    ``holds``: each survivor ``t`` -> its end offset measured before the count was recorded
    (from there on it takes the deleted partitions' keys). ``drains``: each deleted ``d`` ->
    the offset of its drain marker in ``d``, absent while not recorded.
    """

    count: int
    holds: Mapping[int, int]
    drains: Mapping[int, int] = field(default_factory=dict)

    @property
    def kind(self) -> Literal["shrink"]:
        """``"shrink"``."""
        return "shrink"


Step = Grow | Shrink


@dataclass(frozen=True, order=True)
class Boundary:
    """Where step ``step`` (the index in ``counts`` of the count it brings) starts to apply in a
    partition: ``offset`` is the first offset placed with ``counts[step]``.

    ``child`` is the grown partition for a ``marker`` (the boundary is its marker's offset
    + 1), ``None`` for the other kinds.
    """

    offset: int
    step: int
    kind: BoundaryKind
    child: int | None = None


@dataclass(frozen=True)
class PartitionGate:
    """A whole partition held from ``from_offset`` (a life's start or a shrink's hold) until
    every ``(partition, needed)`` of ``needs`` has been read up to ``needed`` (exclusive;
    ``None``: not recorded yet, so it holds). ``step`` is the step that brings the keys."""

    from_offset: int
    needs: tuple[tuple[int, int | None], ...]
    step: int


def survivor(deleted: int, initial: int, count: int) -> int:
    """The partition that takes ``deleted``'s keys when the count drops to ``count``: the
    first of ``deleted`` and its ancestors below ``count`` (8 -> 5: 5 -> 1, 6 -> 2, 7 -> 3)."""
    if count < initial:
        raise ValueError(
            f"a partition count of {count} is below the initial count {initial}; "
            "partitions are never deleted below the initial count"
        )
    for candidate in (deleted, *ancestors(deleted, initial)):
        if candidate < count:
            return candidate
    raise AssertionError("unreachable: initial partitions are below every count")
