"""``InputOrder`` (``framework.runtime.ordering``) on its own: which offsets and marks a batch
commits, what a revoked partition and a rewind leave, and the bounded wait on a fake clock."""

from __future__ import annotations

from framework.coordination.registry import TopicEntry
from framework.growth.markers import MARKER_HEADER, MarkerName
from framework.kafka import Message
from framework.order import NO_FLOOR
from framework.processing import StoredMessage
from framework.runtime.growth_bases import GROWTH_BASE_SCOPE, GROWTH_LIFE_SCOPE, GrowthBases
from framework.runtime.ordering import ORDER_SCOPE, InputOrder
from framework.time.ticks import tick_headers
from rebalance import TopicHistory
from statestore import ProcessorDatabase
from tests.clocks import ManualClock
from tests.framework.order.input_order_world import input_order

C, V, V1 = ("clicks", 0), ("views", 0), ("views", 1)
#: views grew to 2 partitions (views[1]'s growth marker at offset 0 of views[0]) and shrank
#: back to 1: views[1] deleted, its drain marker at offset 1
SHRUNK = TopicHistory.of("views", [1, 2], {1: 0}).shrunk(1, {0: 2}).with_drains({1: 1})


def _world(
    views: TopicHistory | None = None,
    clicks: TopicHistory | None = None,
    bases: GrowthBases | None = None,
) -> tuple[InputOrder, ProcessorDatabase, ManualClock]:
    """An ``InputOrder`` of clicks[0] and views[0] (``views``, ``clicks``: the topics'
    histories in the registry; views of one partition by default, clicks not listed;
    ``bases``: where growth bases are recorded), its state in memory, its clock."""
    entries = {"views": TopicEntry(views or TopicHistory.of("views", [1]))}
    if clicks is not None:
        entries["clicks"] = TopicEntry(clicks)
    order, database, clock = input_order(entries, bases=bases)
    order.follow({C, V})
    return order, database, clock


def _record(
    position: tuple[str, int], offset: int, at: int, key: bytes = b"k"
) -> tuple[Message, str, int, int]:
    message = StoredMessage(position[0], position[1], offset, key, b"", at, [])
    return message, position[0], position[1], offset


def _tick(
    position: tuple[str, int], offset: int, floor: int, *, forced: bool = False
) -> tuple[Message, str, int, int]:
    """A tick of the app ``two`` (``forced``: one the canonical order forced, as
    ``write_forced`` writes it)."""
    headers: list[tuple[str, bytes | None]] = list(tick_headers(floor, floor, "two", forced=forced))
    message = StoredMessage(position[0], position[1], offset, None, b"", floor, headers)
    return message, position[0], position[1], offset


def _marker(
    position: tuple[str, int], offset: int, name: MarkerName
) -> tuple[Message, str, int, int]:
    headers: list[tuple[str, bytes | None]] = [
        (MARKER_HEADER, name.marker_id(position[0]).encode())
    ]
    message = StoredMessage(position[0], position[1], offset, None, b"", 0, headers)
    return message, position[0], position[1], offset


def _drain_marker(position: tuple[str, int], offset: int) -> tuple[Message, str, int, int]:
    """``SHRUNK``'s drain marker of ``position``."""
    return _marker(position, offset, MarkerName(1, position[1], 2, drain=True))


def _growth_marker(
    position: tuple[str, int], offset: int, child: int
) -> tuple[Message, str, int, int]:
    """The marker of ``child``'s growth (``SHRUNK``'s or ``GROWN``'s) in its parent."""
    return _marker(position, offset, MarkerName(2, child, 1))


def _where(messages: list[Message]) -> list[tuple[str | None, int | None]]:
    return [(m.topic(), m.offset()) for m in messages]


def _commit(order: InputOrder, database: ProcessorDatabase) -> dict[tuple[str, int], int]:
    batch = database.begin()
    offsets = order.applied(batch)
    for (topic, partition), offset in offsets.items():
        batch.set_offset(topic, partition, offset)
    batch.commit()
    return offsets


def test_a_batch_commits_the_applied_positions_and_marks_not_what_the_merge_holds() -> None:
    order, database, _clock = _world()
    released = order.take([_record(C, 0, 10), _record(C, 1, 30), _record(V, 0, 20)])
    assert _where(released) == [("clicks", 0), ("views", 0)]  # clicks@1 (30) waits for views
    assert order.waiting() == {C}
    assert _commit(order, database) == {C: 1, V: 1}
    assert database.progress(ORDER_SCOPE) == {C: 10, V: 20}


def test_a_partition_whose_only_waiting_item_is_a_tick_still_gets_its_offset() -> None:
    """(Else its state offset stays behind: a handoff's F waits for ever.)"""
    order, database, _clock = _world()
    order.take([_record(C, 0, 10), _tick(V, 0, 5), _record(V, 1, 20)])
    assert _commit(order, database) == {C: 1, V: 1}  # views@1 (20) waits for clicks
    assert _where(order.take([_tick(C, 1, 50)])) == [("views", 1)]  # the tick waits for views
    assert order.waiting() == {C}
    assert _commit(order, database) == {V: 2}  # clicks stays at 1: not past its waiting tick
    assert database.offsets() == {C: 1, V: 2}


def test_a_revoked_partition_leaves_its_held_records_uncommitted_for_its_next_reader() -> None:
    order, database, _clock = _world()
    order.take([_record(C, 0, 10), _record(C, 1, 30), _record(V, 0, 20)])
    _commit(order, database)
    order.follow({V})  # clicks released (a handoff, a shrink)
    assert order.waiting() == set()
    assert _commit(order, database) == {}
    assert database.offsets()[C] == 1  # clicks@1 was read, never applied: read again there
    order.follow({C, V})  # back: from the state's offset, with its mark
    released = order.take([_record(C, 1, 30), _record(V, 1, 40)])
    assert _where(released) == [("clicks", 1)]


def test_a_rewind_reads_every_partition_again_from_the_states_offsets() -> None:
    order, database, _clock = _world()
    order.take([_record(C, 0, 10), _record(V, 0, 20)])
    assert _commit(order, database) == {C: 1, V: 0}  # views@0 (20) waits for clicks
    fetched = [_record(C, 1, 30), _record(C, 2, 50), _record(V, 1, 40)]
    released = order.take(fetched)  # (a batch that is dropped)
    assert _where(released) == [("views", 0), ("clicks", 1), ("views", 1)]  # clicks@2 waits
    assert order.rewind() == {C: 1, V: 0}
    assert order.waiting() == set()
    assert _where(order.take([_record(V, 0, 20), *fetched])) == _where(released)


def test_records_fetched_again_are_not_added_twice() -> None:
    order, _database, _clock = _world()
    order.take([_record(C, 0, 10), _record(C, 1, 30)])
    assert _where(order.take([_record(C, 1, 30), _record(V, 0, 40)])) == [
        ("clicks", 0),
        ("clicks", 1),
    ]


def test_the_wait_is_per_blocking_partition_and_a_quiet_input_costs_one_wait() -> None:
    """Clicks keep coming, views is quiet: the first forced tick comes after the wait; once
    it is read back, the next click blocked by the same quiet partition gets its tick at
    once (its timer runs from its last record), not after another wait."""
    order, _database, clock = _world()
    order.take([_record(V, 0, 5), _record(C, 0, 10)])
    assert order.forced_ticks({C, V}) == []  # views blocks clicks@0 from now
    clock.sleep(0.5)
    order.take([_record(C, 1, 20)])  # another click: the timer goes on
    assert not order.forcing_due({C, V})
    clock.sleep(0.5)
    assert order.forcing_due({C, V})
    assert order.forcing_due({C, V})  # asking decides nothing
    [tick] = order.forced_ticks({C, V})
    assert (tick.topic, tick.partition, tick.floor) == ("views", 0, 10)
    assert order.forced_ticks({C, V}) == []  # once per floor
    released = order.take([_tick(V, 1, 10, forced=True)])  # read back
    assert _where(released) == [("clicks", 0), ("views", 1)]
    [again] = order.forced_ticks({C, V})  # clicks@1 (20) blocked by the same quiet views
    assert again.floor == 20
    assert order.forced == 2


def test_a_record_of_the_blocking_partition_restarts_its_wait() -> None:
    order, _database, clock = _world()
    order.take([_record(V, 0, 5), _record(C, 0, 10), _record(C, 1, 30)])
    order.forced_ticks({C, V})
    clock.sleep(0.75)
    order.take([_record(V, 1, 12)])  # views moves (to 12): clicks@1 still waits
    clock.sleep(0.5)
    assert not order.forcing_due({C, V})
    clock.sleep(0.5)
    assert [t.floor for t in order.forced_ticks({C, V})] == [30]


def test_no_forced_tick_into_a_partition_a_gate_holds() -> None:
    order, _database, clock = _world()
    order.take([_record(C, 0, 10)])
    order.forced_ticks({C})
    clock.sleep(2)
    assert order.forced_ticks({C}) == []  # views is not flowing
    assert [t.floor for t in order.forced_ticks({C, V})] == [10]


def test_no_forced_tick_into_a_partition_a_shrink_deleted() -> None:
    """(A deleted partition is only drained: nothing is written to it any more.)"""
    order, _database, clock = _world(SHRUNK)
    order.follow({C, V, V1})
    order.take([_record(C, 0, 10)])
    order.forced_ticks({C, V, V1})
    clock.sleep(2)
    assert [(t.topic, t.partition) for t in order.forced_ticks({C, V, V1})] == [V]


def test_a_drop_decides_the_forced_ticks_again() -> None:
    order, _database, clock = _world()
    order.take([_record(C, 0, 10)])
    order.forced_ticks({C, V})
    clock.sleep(1)
    assert len(order.forced_ticks({C, V})) == 1
    order.dropped()
    assert len(order.forced_ticks({C, V})) == 1


def test_a_partition_without_a_stored_mark_starts_below_every_time() -> None:
    _order, database, _clock = _world()
    assert database.progress(ORDER_SCOPE).get(C, NO_FLOOR) == NO_FLOOR


def test_a_waiting_tick_of_the_time_writer_gets_a_forced_tick_and_a_forced_one_none() -> None:
    """A tick the time writer wrote is waited for (it moves its keys' time) like a record: a
    tick is forced for it; the forced tick, read back and waiting in turn, forces none (else
    two idle inputs would get forced ticks for ever, one per wait)."""
    order, _database, clock = _world()
    assert _where(order.take([_record(C, 0, 10), _tick(V, 0, 20)])) == [("clicks", 0)]
    clock.sleep(1)
    [tick] = order.forced_ticks({C, V})
    assert (tick.topic, tick.partition, tick.floor) == ("clicks", 0, 21)
    assert _where(order.take([_tick(C, 1, 21, forced=True)])) == [
        ("views", 0)
    ]  # the forced one waits
    assert order.waiting() == {C}
    clock.sleep(5)
    assert not order.forcing_due({C, V})
    assert order.forced_ticks({C, V}) == []
    order.take([_record(V, 1, 30)])  # a record: the forced tick goes, the record waits ...
    clock.sleep(1)
    assert [(t.topic, t.floor) for t in order.forced_ticks({C, V})] == [("clicks", 31)]


def test_a_growth_childs_base_is_committed_once_its_parent_passes_the_marker() -> None:
    """(A restart that resumes the child from its state offset takes that mark as base.)"""
    grown = TopicHistory.of("clicks", [1, 2], {1: 1})
    order, database, _clock = _world(clicks=grown)
    child = ("clicks", 1)
    order.follow({C, child, V})
    order.take([_record(C, 0, 30), _record(V, 0, 40)])
    _commit(order, database)
    assert database.offsets()[child] == 0
    assert child not in database.progress(ORDER_SCOPE)  # (its base not known yet: no mark)
    order.take([_growth_marker(C, 1, 1)])
    _commit(order, database)
    assert database.offsets()[child] == 0
    assert database.progress(ORDER_SCOPE)[child] == 30
    assert database.progress(GROWTH_BASE_SCOPE) == {child: 30}  # (kept: to publish)
    assert database.progress(GROWTH_LIFE_SCOPE) == {child: 0}


def test_a_forced_tick_overtaken_by_a_record_stays_an_errand_and_forces_no_more() -> None:
    """A click at 10 waits for views (quiet): a forced tick 10 is decided for views. Before it
    is read back, a view at 50 arrives and releases the click (the tick was not needed).
    Read back after the view, the forced tick raises nothing and nothing waits for it: no
    tick is forced for it, however long it waits; the commit stops before it."""
    order, database, clock = _world()
    assert order.take([_record(C, 0, 10)]) == []
    clock.sleep(1)
    [tick] = order.forced_ticks({C, V})
    assert (tick.topic, tick.floor) == ("views", 10)
    assert _where(order.take([_record(V, 0, 50)])) == [("clicks", 0)]
    assert (
        order.take([_tick(V, 1, 10, forced=True)]) == []
    )  # (views@0 50 waits for clicks, an errand too)
    assert order._buffer.wanted() == 1  # (the view of 50 only)
    clock.sleep(1)
    [tick] = order.forced_ticks({C, V})
    assert (tick.topic, tick.floor) == ("clicks", 51)  # (for the view, not for the errand)
    released = order.take([_tick(C, 1, 51, forced=True)])
    assert _where(released) == [("views", 0), ("views", 1)]
    clock.sleep(5)
    assert order.forced_ticks({C, V}) == []
    assert _commit(order, database) == {C: 1, V: 2}
