"""A forced tick says it was forced (``framework.time.ticks.FORCED_HEADER``, version 1): read
again after a restart it is an errand still, so it costs no more forced tick. A forced tick
of before they said so (no header) is still read, as a tick something waits for."""

from __future__ import annotations

from framework.coordination.registry import TopicEntry
from framework.kafka import Message
from framework.processing import StoredMessage
from framework.time.ticks import (
    FORCED_HEADER,
    TICK_HEADER,
    TickRead,
    is_forced_tick,
    read_tick,
    tick_headers,
)
from rebalance import TopicHistory
from tests.framework.order.input_order_world import input_order
from tests.framework.order.test_input_order import _commit, _record

C, V = ("clicks", 0), ("views", 0)
ENTRIES = {"views": TopicEntry(TopicHistory.of("views", [1]))}


def _tick(position: tuple[str, int], offset: int, floor: int, *, forced: bool) -> Message:
    headers: list[tuple[str, bytes | None]] = list(tick_headers(floor, 0, "two", forced=forced))
    return StoredMessage(position[0], position[1], offset, None, b"", floor, headers)


def _forced_after_a_restart(*, forced: bool) -> int:
    """A click at 10 ms waits for views (quiet): a forced tick 10 into views releases it and
    waits in the merge (an errand). The batch commits views before it; the processor
    restarts and reads the tick again (``forced``: with the forced header, else as written
    before ticks said so). How many ticks it forces then while the inputs stay quiet."""
    order, database, clock = input_order(ENTRIES)
    order.follow({C, V})
    order.take([_record(C, 0, 10)])
    clock.sleep(1)
    [tick] = order.forced_ticks({C, V})
    assert (tick.topic, tick.floor) == ("views", 10)
    read_back = _tick(V, 0, 10, forced=forced)
    assert [m.topic() for m in order.take([(read_back, "views", 0, 0)])] == ["clicks"]
    assert _commit(order, database) == {C: 1, V: 0}  # (views stays before its errand)

    restarted, _, clock = input_order(ENTRIES, database)
    restarted.follow({C, V})
    assert restarted.take([(read_back, "views", 0, 0)]) == []
    forced_ticks = 0
    for _ in range(3):
        clock.sleep(1)
        forced_ticks += len(restarted.forced_ticks({C, V}))
    return forced_ticks


def test_a_forced_tick_read_again_after_a_restart_costs_no_forced_tick() -> None:
    assert _forced_after_a_restart(forced=True) == 0


def test_a_forced_tick_of_before_they_said_so_costs_one_more_after_a_restart() -> None:
    """(The old format: the restarted processor does not know it forced it.)"""
    assert _forced_after_a_restart(forced=False) == 1


def test_the_forced_header_is_read_by_its_version_beside_the_tick() -> None:
    forced = tick_headers(10, 20, "app", steps=1, forced=True)
    assert read_tick(list(forced)) == TickRead(10, 20, "app", 1)  # (the tick as before)
    assert is_forced_tick(list(forced))
    plain = tick_headers(10, 20, "app", steps=1)
    assert [name for name, _ in plain] == [TICK_HEADER]  # (an ordinary tick is as before)
    assert not is_forced_tick(list(plain))
    unknown = [*plain, (FORCED_HEADER, b"2")]
    assert not is_forced_tick(unknown)  # (a version this reader does not know: not forced)
    assert read_tick(unknown) == TickRead(10, 20, "app", 1)
