"""Review of branch order-faults (issue 36 §1, faults A-E): reproductions of defects left in
the live canonical order (each ``xfail(strict=True)`` until fixed)."""

from __future__ import annotations

import pytest

from rebalance import TopicHistory
from tests.framework.order.test_input_order import _record, _tick
from tests.framework.order.test_input_order import _world as _order_world

C, V0, V1 = ("clicks", 0), ("views", 0), ("views", 1)
#: views of two partitions from the start
TWO_VIEWS = TopicHistory.of("views", [2])


@pytest.mark.xfail(
    strict=True,
    reason="forced ticks are decided for the least head only, which may be an errand: "
    "they step up one ms at a time, one per batch, until the waiting record's mark",
)
def test_a_record_behind_a_forced_tick_is_not_released_one_millisecond_per_batch() -> None:
    """A view at 10 ms waits for clicks (idle): a forced tick 11 into clicks releases it and
    then stays in the merge (an errand: nothing waits for it, no tick is forced for it:
    fault C's fix). A view at 1000 ms comes to views[1]. The least head is now the clicks
    errand (11), blocked by views[0] (10): the tick forced is views[0] at 11, read back it
    releases the errand and is the least head itself (11, views), blocked by clicks (needs
    12): clicks gets 12, views[0] 12, ... each floor one above the last, one forced tick a
    batch, until 1001: the view at 1000 waits ~2000 batches (event times in ms: a gap of an
    hour is millions) and as many ticks are written into the input topics. Forcing for the
    least *wanted* item (floors 1001 into clicks, 1000 into views[0]) releases it at once."""
    order, _database, clock = _order_world(TWO_VIEWS)
    order.follow({C, V0, V1})
    flowing = {C, V0, V1}
    offsets = {C: 0, V0: 1, V1: 0}
    assert order.take([_record(V0, 0, 10)]) == []
    clock.sleep(1)
    [tick] = order.forced_ticks(flowing)
    assert (tick.topic, tick.partition, tick.floor) == ("clicks", 0, 11)
    released = order.take([_tick(C, 0, 11)])
    offsets[C] = 1
    assert [(m.topic(), m.offset()) for m in released] == [("views", 0)]
    assert order.take([_record(V1, 0, 1000)]) == []
    forced = 0
    for _ in range(10):
        clock.sleep(1)
        ticks = order.forced_ticks(flowing)
        forced += len(ticks)
        fetched = []
        for t in ticks:
            position = (t.topic, t.partition)
            fetched.append(_tick(position, offsets[position], t.floor))
            offsets[position] += 1
        released = order.take(fetched)
        if any((m.topic(), m.partition()) == V1 for m in released):
            return
    raise AssertionError(f"views[1]@0 (1000 ms) still waits after {forced} forced ticks")
