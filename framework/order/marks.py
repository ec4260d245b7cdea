"""A partition's mark: its event-time floor as read, the position of its items in time.

The **mark** of an item at offset ``o`` of partition ``P`` is ``max(base(P), event time of
every item of P up to and including it)``: a record's event time (as the app's event-time
rule gives it, from the record alone; a record without one raises nothing) and a tick's
``floor``. It never decreases along a partition, and it depends only on the log and on
``base(P)``, so every reader computes the same marks:

- ``NO_FLOOR`` for a partition read from its first offset;
- the mark stored with the state when reading resumes from it (``MergeBuffer.applied_marks``);
- a growth child's: its parent's mark at the growth marker;
- a shrink survivor's, after the hold: the larger of its own and the deleted partition's final
  mark (``PartitionMark.raise_to``).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["ENDED", "LARGEST", "NO_FLOOR", "PartitionMark", "running_marks"]

#: the largest time (ms) a mark, an event time or a tick's floor holds
#: (``framework.time.ticks.TIME_LIMIT``)
LARGEST = (1 << 62) - 1
#: the mark of a partition read from its start before any event time: below every time, it
#: moves no key's time (ticks written then carry it as their floor)
NO_FLOOR = -LARGEST
#: the mark of a partition read up to its end by a reader with an end: above every time
ENDED = LARGEST + 1


def _check(time: int, what: str) -> int:
    if not NO_FLOOR <= time <= LARGEST:
        raise ValueError(
            f"{what} {time} is outside the times a mark holds ({NO_FLOOR} to {LARGEST} ms). "
            "Fix: give times in milliseconds within that range (NO_FLOOR when none is known)."
        )
    return time


class PartitionMark:
    """The mark of one partition as its items are read in offset order, from ``base``."""

    __slots__ = ("value",)

    def __init__(self, base: int = NO_FLOOR) -> None:
        self.value = _check(base, "a partition's base mark")

    def read(self, event_time: int | None) -> int:
        """The mark of the next item, whose event time is ``event_time`` (``None``: none)."""
        if event_time is not None and event_time > self.value:
            self.value = _check(event_time, "an event time")
        return self.value

    def raise_to(self, floor: int) -> int:
        """Raise the mark to at least ``floor`` (a shrink survivor taking a deleted partition's
        final mark); the new mark."""
        self.value = max(self.value, _check(floor, "a carried mark"))
        return self.value


def running_marks(event_times: Iterable[int | None], base: int = NO_FLOOR) -> list[int]:
    """The marks of a partition's items read from ``base``, one per event time (``None``: an
    item without one)."""
    mark = PartitionMark(base)
    return [mark.read(event_time) for event_time in event_times]
