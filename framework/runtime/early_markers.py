"""Growth markers read before the registry view shows their step, kept with the state.

A processor reading a growth child's parent ``p`` may read the child's growth marker before
its view of the registry shows the growth: it cannot name the child's life yet (its start is
the registry's), so ``ChildBases`` cannot keep a base for it. It keeps the marker instead
(``EarlyMarkers``): its offset in ``p``, its name (the step it names) and ``p``'s mark there
(the child's base, ``p``'s own base being known), in progress scopes of the state written
with the next batch given to ``InputOrder.applied``: the batch that commits ``p`` past the
marker, or one before it. Once the view shows the step the marker names the child's life and
the base is found (``ChildBases.resolve``), kept as any found base and the marker cleared in
the same write; so a restart, or ``p`` moving to another processor, after ``p`` was
committed past the marker, still finds the base (the processor that read it keeps it,
whichever partitions it reads). A marker kept is a fact of ``p``'s log: read again after a
batch is dropped, it gives the same mark.

Only markers read while ``p``'s base is known are kept: while it is not, ``p`` is a child
waiting for its own base, its offset kept at its life's start, so it is not committed past
the marker.
"""

from __future__ import annotations

from typing import NamedTuple

from framework.growth.markers import MarkerName
from rebalance.positions import Position
from statestore import ProcessorDatabase, StateBatch

__all__ = [
    "EARLY_AT_SCOPE",
    "EARLY_BASE_SCOPE",
    "EARLY_COUNT_SCOPE",
    "EARLY_STEP_SCOPE",
    "EarlyMarker",
    "EarlyMarkers",
]

#: per growth child ``(topic, child)``: the offset in its parent of its marker kept
EARLY_AT_SCOPE = "growth-early-at"
#: per growth child: its parent's mark at that marker (the child's base)
EARLY_BASE_SCOPE = "growth-early-base"
#: per growth child: the partition count of the step the marker names
EARLY_COUNT_SCOPE = "growth-early-count"
#: per growth child: the index of that step (``-1``: an id that does not name it)
EARLY_STEP_SCOPE = "growth-early-step"

_SCOPES = (EARLY_AT_SCOPE, EARLY_BASE_SCOPE, EARLY_COUNT_SCOPE, EARLY_STEP_SCOPE)


class EarlyMarker(NamedTuple):
    """A growth marker read in a parent before the registry view showed its step."""

    #: its offset in the parent
    offset: int
    #: what it names
    name: MarkerName
    #: the parent's mark there: the child's base
    base: int


class EarlyMarkers:
    """The early growth markers a processor keeps, by child ``(topic, child)``: those its
    state keeps (loaded at the start) and those read since."""

    def __init__(self, database: ProcessorDatabase) -> None:
        #: the markers kept, by child
        self._kept: dict[Position, EarlyMarker] = _load(database)
        #: the children whose marker a batch was given to keep (since the last drop)
        self._given: set[Position] = set()
        #: the children whose marker is settled and is to be cleared from the state
        self._clearing: set[Position] = set()
        #: the children whose marker a batch was given to clear (since the last drop)
        self._cleared: set[Position] = set()

    def add(self, topic: str, offset: int, name: MarkerName, base: int) -> None:
        """Keep the marker of ``name``'s child read at ``offset`` of its parent, the parent's
        mark there ``base`` (the first copy in the parent is the one kept)."""
        child = (topic, name.partition)
        kept = self._kept.get(child)
        if kept is not None and kept.offset <= offset:
            return
        self._kept[child] = EarlyMarker(offset, name, base)
        self._given.discard(child)
        self._clearing.discard(child)
        self._cleared.discard(child)

    def items(self) -> list[tuple[Position, EarlyMarker]]:
        """The markers kept, by child."""
        return sorted(self._kept.items())

    def settle(self, child: Position) -> None:
        """The view shows the step of ``child``'s marker (its base found, or not a marker to
        keep): cleared from the state with the next batch."""
        if self._kept.pop(child, None) is not None:
            self._given.discard(child)
            self._clearing.add(child)

    def write(self, batch: StateBatch) -> None:
        """Keep with ``batch`` the markers no batch was given yet; clear the settled ones."""
        for child in sorted(self._clearing):
            for scope in _SCOPES:
                batch.clear_progress(scope, *child)
            self._cleared.add(child)
        self._clearing.clear()
        for child, early in self.items():
            if child in self._given:
                continue
            topic, partition = child
            step = -1 if early.name.step is None else early.name.step
            batch.set_progress(EARLY_AT_SCOPE, topic, partition, early.offset)
            batch.set_progress(EARLY_BASE_SCOPE, topic, partition, early.base)
            batch.set_progress(EARLY_COUNT_SCOPE, topic, partition, early.name.count)
            batch.set_progress(EARLY_STEP_SCOPE, topic, partition, step)
            self._given.add(child)

    def dropped(self) -> None:
        """The batches not committed were dropped: give what they kept and cleared again."""
        self._given.clear()
        self._clearing |= self._cleared
        self._cleared.clear()


def _load(database: ProcessorDatabase) -> dict[Position, EarlyMarker]:
    """The early markers ``database`` keeps, by child."""
    at = database.progress(EARLY_AT_SCOPE)
    bases = database.progress(EARLY_BASE_SCOPE)
    counts = database.progress(EARLY_COUNT_SCOPE)
    steps = database.progress(EARLY_STEP_SCOPE)
    kept: dict[Position, EarlyMarker] = {}
    for child, offset in at.items():
        if child not in bases or child not in counts or child not in steps:
            continue
        step = None if steps[child] < 0 else steps[child]
        name = MarkerName(counts[child], child[1], step)
        kept[child] = EarlyMarker(offset, name, bases[child])
    return kept
