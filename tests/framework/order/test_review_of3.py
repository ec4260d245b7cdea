"""Adversarial review of order-faults3 (issue 36 §1): a shrink survivor's stash. Each test
held a fault found (see the review report) as a strict xfail; each is fixed now and holds
the fix."""

from __future__ import annotations

from framework.coordination.registry import TopicEntry
from framework.input_times import ORDER_SCOPE
from framework.kafka import Message
from framework.processing import StoredMessage
from framework.runtime.completions import complete_offsets
from framework.runtime.errands import Errands
from framework.runtime.ordering import InputOrder, Taken
from framework.time.ticks import tick_headers
from rebalance import TopicHistory
from rebalance.positions import Position
from statestore import ProcessorDatabase
from statestore.layout import offset_key
from tests.framework.order.input_order_world import input_order
from tests.framework.order.test_input_order import (
    SHRUNK,
    _commit,
    _drain_marker,
    _growth_marker,
    _record,
    _tick,
)

C, C1 = ("clicks", 0), ("clicks", 1)
V0, V1, V2 = ("views", 0), ("views", 1), ("views", 2)


def _where(messages: list[Message]) -> set[str]:
    return {f"{m.topic()}[{m.partition()}]@{m.offset()}" for m in messages}


def _pass_over(order: InputOrder, database: ProcessorDatabase, flowing: set[Position]) -> None:
    """What ``BatchLoop._pass_over`` does once every batch is committed: the state offset of
    each flowing partition not ``waiting`` moves to where the consumer got to (here: the
    next offset the order read)."""
    stored = database.offsets()
    batch = database.begin()
    for position in sorted(flowing - order.waiting()):
        reached = order._next[position]
        if reached > stored.get(position, -1):
            batch.set_offset(position[0], position[1], reached)
    batch.commit()


def test_a_survivors_stashed_records_are_not_passed_over() -> None:
    """views[0] survives the shrink (hold 2) of views[1], which is assigned here but not read
    past its drain marker yet. views[0]'s own key a at 2 passes the gate and waits unadded in
    the stash. Every batch is committed; the pass-over must not move views[0] past 2; after
    a restart the record at views[0]@2 is still applied."""
    entries = {"views": TopicEntry(SHRUNK)}
    order, database, _clock = input_order(entries)
    order.follow({C, V0, V1})
    fetched: list[Taken] = [
        _growth_marker(V0, 0, 1),
        _record(V0, 1, 50, b"a"),
        _record(V0, 2, 55, b"a"),  # (past the hold: a is views[0]'s own key, not held)
        _record(C, 0, 60),
    ]
    released = order.take(fetched)
    assert order._buffer.pending(V0) == 0  # (views[0]@1 released: every FIFO item applied)
    _commit(order, database)
    assert "views[0]@2" not in _where(released)  # (stashed: views[1]'s final mark unknown)
    _pass_over(order, database, {C, V0, V1})
    assert database.offsets()[V0] <= 2, "passed over views[0]@2, never applied"
    restarted, _, _clock = input_order(entries, database)
    restarted.follow({C, V0, V1})
    starts = database.offsets()
    log = {
        V0: fetched[:3],
        V1: [_record(V1, 0, 100), _drain_marker(V1, 1)],
        C: [fetched[3], _record(C, 1, 200)],
    }
    again = [entry for p, entries in sorted(log.items()) for entry in entries[starts.get(p, 0) :]]
    released += restarted.take(again)
    assert "views[0]@2" in _where(released)


#: views 1 -> 3 (1 and 2 grown from 0, markers at 0 and 1), shrunk to 2 (views[2] merges into
#: views[0], hold 3, drained at 0), then to 1 (views[1] merges into views[0], hold 6)
TWICE = (
    TopicHistory.of("views", [1, 3], {1: 0, 2: 1})
    .shrunk(2, {0: 3})
    .with_drains({2: 1})
    .shrunk(1, {0: 6})
)


def test_a_second_shrinks_hold_does_not_overtake_the_first_ones_stash() -> None:
    """views[0] survives two shrinks (holds 3 and 6). It is read past its first hold (3, its
    own key a) while views[2] (assigned here) is not drained yet: 3 waits in its stash. A
    clicks partition is assigned (follow relinks the survivors): the record at 4 must not be
    released before 3, nor the commit pass 3."""
    entries = {"views": TopicEntry(TWICE)}
    order, database, _clock = input_order(entries)
    order.follow({C, V0, V2})
    released = order.take(
        [
            _record(C, 0, 10),
            _record(V0, 0, 5, b"a"),
            _record(V0, 1, 6, b"a"),
            _record(V0, 2, 7, b"a"),
            _record(V0, 3, 8, b"a"),  # (past the first hold: stashed)
        ]
    )
    assert "views[0]@3" not in _where(released)
    order.follow({C, C1, V0, V2})
    released += order.take([_record(V0, 4, 9, b"a"), _record(C, 1, 20), _record(C1, 0, 20)])
    offsets = _commit(order, database)
    assert "views[0]@4" not in _where(released) and offsets.get(V0, 0) <= 3


def _survivor_marks(fetches: list[list[Taken]]) -> dict[str, int]:
    """The marks views[0]'s items take past its hold (2) when the same log is fetched in
    ``fetches``, views[0]'s gate open (it is read here after views[1])."""
    order, _database, _clock = input_order({"views": TopicEntry(SHRUNK)})
    order.follow({C, V0, V1})
    for fetched in fetches:
        order.take(fetched)
    part = order._buffer._parts[V0]
    return {f"views[0]@{item.offset}": item.mark for item in part.fifo if item.offset >= 2}


def test_a_deleted_partitions_final_mark_does_not_depend_on_the_fetch() -> None:
    """views[1] holds k at 100 ms, its drain marker at 1, then a tick of the app (a time
    writer that did not know the shrink yet) with floor 500. views[0]'s item past its hold
    takes views[1]'s mark at its drain marker, whether the tick came in the same fetch or
    the next."""
    v1 = [_record(V1, 0, 100), _drain_marker(V1, 1), _tick(V1, 2, 500)]
    v0 = [_growth_marker(V0, 0, 1), _record(V0, 1, 50, b"a"), _record(V0, 2, 55, b"a")]
    clicks = [_record(C, 0, 10)]
    together = _survivor_marks([[*clicks, *v1], v0])
    apart = _survivor_marks([[*clicks, *v1[:2]], [v1[2]], v0])
    assert together == apart


def test_an_arrival_apps_catchup_completion_writes_only_its_offsets() -> None:
    """The default ``arrival`` path is the old one: completing a handoff of an app that never
    stored a canonical-order mark writes the partitions' offsets F, no order-mark key."""
    _order, database, _clock = input_order({})
    batch = database.begin()
    complete_offsets(database, batch, {C: 7})
    assert offset_key(C[0], C[1], ORDER_SCOPE) not in batch._meta
    batch.commit()


def _tick_message(offset: int, floor: int, *, forced: bool) -> StoredMessage:
    headers: list[tuple[str, bytes | None]] = list(tick_headers(floor, floor, "two", forced=forced))
    return StoredMessage("views", 0, offset, None, b"", floor, headers)


def test_a_time_writers_tick_with_a_forced_ticks_floor_is_waited_for() -> None:
    """This processor forced a tick with floor 100 into views[0]; the app's time writer's
    tick with floor 100 is read first (offset 5), the forced one after (6). The time
    writer's is waited for (it closes windows), the forced one is an errand."""
    errands = Errands()
    errands.decided(V0, 100)
    assert errands.tick_wanted(_tick_message(5, 100, forced=False), V0, 5, 100)
    assert not errands.tick_wanted(_tick_message(6, 100, forced=True), V0, 6, 100)
