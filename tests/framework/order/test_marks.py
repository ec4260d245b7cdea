"""A partition's mark as items are read, and the constants every reader shares."""

from __future__ import annotations

import pytest

from framework.order import ENDED, NO_FLOOR, PartitionMark, running_marks
from framework.order.marks import LARGEST
from framework.runtime.ticking import NO_FLOOR as TICKS_NO_FLOOR
from framework.time.ticks import TIME_LIMIT


def test_the_mark_is_the_running_max_of_event_times_from_the_base() -> None:
    assert running_marks([None, 5, 3, None, 7, 7, 2]) == [NO_FLOOR, 5, 5, 5, 7, 7, 7]
    assert running_marks([3, None, 9], base=6) == [6, 6, 9]
    assert running_marks([]) == []


def test_a_survivor_takes_the_larger_of_its_own_and_a_deleted_partitions_mark() -> None:
    mark = PartitionMark(4)
    assert mark.raise_to(9) == 9
    assert mark.raise_to(2) == 9
    assert mark.read(None) == 9


def test_times_outside_what_a_mark_holds_are_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match="outside the times a mark holds"):
        PartitionMark(NO_FLOOR - 1)
    with pytest.raises(ValueError, match="Fix: give times in milliseconds"):
        PartitionMark().read(LARGEST + 1)


def test_the_constants_are_the_ticks_ones_and_ended_is_above_every_time() -> None:
    assert LARGEST == TIME_LIMIT
    assert NO_FLOOR == TICKS_NO_FLOOR
    assert NO_FLOOR == -TIME_LIMIT
    assert ENDED > TIME_LIMIT
