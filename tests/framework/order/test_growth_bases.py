"""A growth child's base as a recorded fact (``framework.runtime.growth_bases``): found by
whoever reads the parent past the marker, kept with that batch, published once committed,
again after a kill between the commit and the publish; the control log keeps the first."""

from __future__ import annotations

import pytest

from framework.coordination.registry import TopicEntry
from framework.growth.markers import MarkerName
from framework.kafka import KafkaIOError
from framework.runtime.early_markers import EARLY_AT_SCOPE, EARLY_BASE_SCOPE
from framework.runtime.growth_bases import (
    GROWTH_BASE_SCOPE,
    ControlBases,
    MemoryBases,
    growth_base_record,
)
from framework.runtime.ordering import ORDER_SCOPE
from rebalance import TopicHistory
from rebalance.control import ControlState
from rebalance.control_schema import check_record
from rebalance.record_checks import MalformedRecordError
from statestore import ProcessorDatabase
from tests.framework.order.input_order_world import input_order
from tests.framework.order.test_input_order import (
    _commit,
    _growth_marker,
    _marker,
    _record,
    _tick,
    _world,
)
from tests.framework.order.test_review_faults import (
    GROWN,
    GROWN_TWICE,
    _applied_of_k,
    _input_order,
)

C, C1, V0 = ("clicks", 0), ("clicks", 1), ("views", 0)
#: clicks[1]'s life (its start offset 0 in ``GROWN``)
LIFE = ("clicks", 1, 0)
#: clicks[0]: a click at 500, clicks[1]'s marker (offset 1), then a click at 900
PARENT = [_record(C, 0, 500, b"other"), _growth_marker(C, 1, 1), _record(C, 2, 900, b"other")]
#: k's click in clicks[1] (100: its mark is the base, 500) and its view (300)
CHILD = [_record(C1, 0, 100), _record(V0, 0, 300)]
#: views[0]: k's view, then a tick at 1000 (it lets clicks[0]'s records go)
VIEWS = [_record(V0, 0, 300), _tick(V0, 1, 1000)]


def _restarted(database: ProcessorDatabase, bases: MemoryBases) -> None:
    """A processor of clicks[0] and views[0] started again over ``database``, its first
    batch's ``take``."""
    entries = {"clicks": TopicEntry(GROWN), "views": TopicEntry(TopicHistory.of("views", [1]))}
    order, _database, _clock = input_order(entries, database, bases)
    order.follow({C, V0})
    order.take([])


def test_killed_after_the_batch_past_the_marker_committed_the_base_is_published_at_restart() -> (
    None
):
    """The parent's reader commits the batch that reads past the marker (and a click at 900
    after it: its stored mark is 900 now, the mark at the marker no longer computable from
    where it resumes) and is killed before it publishes. Started again, its first ``take``
    publishes the base it kept with that batch (500), and the child's reader elsewhere
    applies k's view before k's click, as the canonical order has it."""
    bases = MemoryBases()
    parent_reader, database, _clock = _world(clicks=GROWN, bases=bases)
    parent_reader.follow({C, V0})
    parent_reader.take([*PARENT, *VIEWS])
    _commit(parent_reader, database)
    assert database.offsets()[C] == 3 and database.progress(ORDER_SCOPE)[C] == 900
    assert database.progress(GROWTH_BASE_SCOPE) == {C1: 500}
    assert bases.bases == {}  # (killed here: not published)

    child_reader, _db, clock = _world(clicks=GROWN, bases=bases)
    child_reader.follow({C1, V0})
    assert child_reader.take(CHILD) == []  # (clicks[1] waits for its base)

    _restarted(database, bases)
    assert bases.bases == {LIFE: 500}
    assert _applied_of_k(child_reader, clock, []) == ["views[0]", "clicks[1]"]


def test_killed_before_the_batch_past_the_marker_committed_the_base_is_found_again() -> None:
    """Killed before the commit: nothing kept, nothing published; the next reader of the
    parent reads it again from its state offset and finds the same base."""
    bases = MemoryBases()
    first, database, _clock = _world(clicks=GROWN, bases=bases)
    first.follow({C, V0})
    first.take(PARENT)  # (killed: no commit)
    assert database.progress(GROWTH_BASE_SCOPE) == {} and bases.bases == {}

    again, database, _clock = _world(clicks=GROWN, bases=bases)
    again.follow({C, V0})
    again.take(PARENT)
    _commit(again, database)
    again.take([])
    assert bases.bases == {LIFE: 500}


def test_a_lost_publish_is_tried_again_at_the_next_take() -> None:
    published: list[dict[str, object]] = []
    fail = [True]

    def append(record: object) -> int:
        if fail.pop() if fail else False:
            raise KafkaIOError("timed out")
        published.append(dict(record))  # type: ignore[call-overload]
        return 1

    state = ControlState()
    control = ControlBases(lambda: state, append)
    order, database, _clock = _world(clicks=GROWN, bases=control)
    order.follow({C, V0})
    order.take(PARENT)
    _commit(order, database)
    order.take([])  # (the append fails: logged, again later)
    assert published == []
    order.take([])
    assert published == [growth_base_record("clicks", 1, 0, 500)]
    state = state.apply(published[0])
    order.take([])
    assert len(published) == 1  # (recorded: not published again)


def test_a_grandchilds_base_found_while_its_parent_waits_for_its_own_is_the_larger() -> None:
    """clicks[3]'s marker is clicks[1]'s first item (offset 0), read while clicks[1] waits
    for its own base: its own mark there (NO_FLOOR) is not clicks[3]'s base. Once clicks[1]
    takes 500 (its parent's mark at its marker), clicks[3]'s base is found: 500."""
    order, clock = _input_order()
    database = order._database
    assert GROWN_TWICE.rank(3, 0) == 2  # (clicks[3]'s life: from offset 0)
    assert order.take([_marker(C1, 0, MarkerName(4, 3, 2))]) == []
    order.take([_record(C, 0, 500, b"other"), _growth_marker(C, 1, 1)])
    _commit(order, database)
    assert database.progress(GROWTH_BASE_SCOPE) == {C1: 500, ("clicks", 3): 500}
    assert order.take([]) == [] and clock.monotonic() == 0


def test_the_control_log_keeps_the_first_base_of_a_life() -> None:
    state = ControlState().apply(growth_base_record("clicks", 1, 0, 500))
    assert state.apply(growth_base_record("clicks", 1, 0, 7)).growth_bases == {LIFE: 500}
    later_life = state.apply(growth_base_record("clicks", 1, 40, 7))
    assert later_life.growth_bases == {LIFE: 500, ("clicks", 1, 40): 7}
    with pytest.raises(MalformedRecordError, match="base"):
        check_record({**growth_base_record("clicks", 1, 0, 0), "base": "500"})


def test_a_child_waiting_for_its_base_is_waiting_for_the_pass_over() -> None:
    """(The pass-over moves the offsets of partitions not waiting past what holds no record,
    without a mark: a waiting child's offset must stay at its life's start, where a restart
    looks for its base.)"""
    bases = MemoryBases()
    order, _database, _clock = _world(clicks=GROWN, bases=bases)
    order.follow({C1, V0})
    assert order.waiting() == {C1}  # (nothing read of it yet)
    bases.publish("clicks", 1, 0, 500)
    order.take([])
    assert order.waiting() == set()


def test_a_publish_lost_at_a_start_is_tried_again() -> None:
    """Killed after the commit; the first ``take`` after the start cannot publish (Kafka
    timed out): the next one does."""
    bases = MemoryBases()
    parent_reader, database, _clock = _world(clicks=GROWN, bases=bases)
    parent_reader.follow({C, V0})
    parent_reader.take([*PARENT, *VIEWS])
    _commit(parent_reader, database)
    published: list[dict[str, object]] = []
    fail = [True]

    def append(record: object) -> int:
        if fail.pop() if fail else False:
            raise KafkaIOError("timed out")
        published.append(dict(record))  # type: ignore[call-overload]
        return 1

    entries = {"clicks": TopicEntry(GROWN), "views": TopicEntry(TopicHistory.of("views", [1]))}
    control = ControlBases(ControlState, append)
    restarted, _database, _clock = input_order(entries, database, control)
    restarted.follow({C, V0})
    restarted.take([])
    assert published == []
    restarted.take([])
    assert published == [growth_base_record("clicks", 1, 0, 500)]


def test_a_marker_the_registry_does_not_record_yet_is_taken_from_the_parents_stream() -> None:
    """The usual order: the processor reads the new count before `splitstate expand` records
    clicks[1]'s marker. The first growth marker of clicks[1] read in clicks[0] is the one
    (placement's rule): k's click in clicks[1] (100) takes the base 500 there."""
    bases = MemoryBases()
    unrecorded = TopicHistory.of("clicks", [1, 2])
    order, database, clock = _world(clicks=unrecorded, bases=bases)
    order.follow({C, C1, V0})
    applied = _applied_of_k(order, clock, [*PARENT, *CHILD])
    assert applied == ["views[0]", "clicks[1]"]
    _commit(order, database)
    order.take([])
    assert bases.bases == {LIFE: 500}


def test_a_marker_read_before_the_registry_view_shows_its_step_gives_its_base_later() -> None:
    """The parent's reader reads clicks[1]'s marker while its view of the registry still
    has clicks of one partition: once the view shows the growth, the marker's base (500,
    clicks[0]'s mark at it, not 900, its mark by then) is found, kept and published."""
    bases = MemoryBases()
    views = TopicEntry(TopicHistory.of("views", [1]))
    entries = {"clicks": TopicEntry(TopicHistory.of("clicks", [1])), "views": views}
    order, database, _clock = input_order(entries, bases=bases)
    order.follow({C, V0})
    order.take([*PARENT, *VIEWS])
    _commit(order, database)
    assert database.progress(GROWTH_BASE_SCOPE) == {}
    entries["clicks"] = TopicEntry(GROWN)
    order.take([])
    _commit(order, database)
    order.take([])
    assert bases.bases == {LIFE: 500}


def test_an_early_marker_whose_batch_was_dropped_is_kept_by_the_next() -> None:
    """The batch that would keep an early marker is dropped (an aborted transaction:
    ``rewind``): clicks[0] is read again from its start and the next batch keeps the marker
    (clicks[1], at offset 1, mark 500); once the view shows the growth, a batch keeps the
    base and clears the marker in one write, and a dropped one of those is written again."""
    bases = MemoryBases()
    views = TopicEntry(TopicHistory.of("views", [1]))
    entries = {"clicks": TopicEntry(TopicHistory.of("clicks", [1])), "views": views}
    order, database, _clock = input_order(entries, bases=bases)
    order.follow({C, V0})
    order.take([*PARENT, *VIEWS])
    order.applied(database.begin())  # (dropped)
    assert order.rewind() == {C: 0, V0: 0}
    order.take([*PARENT, *VIEWS])
    _commit(order, database)
    assert database.progress(EARLY_AT_SCOPE) == {C1: 1}
    assert database.progress(EARLY_BASE_SCOPE) == {C1: 500}
    entries["clicks"] = TopicEntry(GROWN)
    order.take([])
    order.applied(database.begin())  # (dropped)
    order.rewind()
    _commit(order, database)
    assert database.progress(GROWTH_BASE_SCOPE) == {C1: 500}
    assert database.progress(EARLY_AT_SCOPE) == {}
    order.take([])
    assert bases.bases == {LIFE: 500}
