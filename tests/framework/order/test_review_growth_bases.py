"""Review of ``growth-base`` (issue 36 §1): faults of a growth child's recorded base, each
held by a strict xfail (the in-memory worlds of ``test_growth_bases``)."""

from __future__ import annotations

import pytest

from framework.bootstrap.order_cut import Applied, applied_prefix
from framework.coordination.registry import TopicEntry
from framework.growth.markers import MarkerName
from framework.kafka import Message
from framework.order import NO_FLOOR
from framework.runtime.completions import complete_offsets
from framework.runtime.early_markers import EARLY_AT_SCOPE, EARLY_BASE_SCOPE
from framework.runtime.growth_bases import GROWTH_BASE_SCOPE, GROWTH_LIFE_SCOPE, MemoryBases
from rebalance import TopicHistory
from tests.framework.order.input_order_world import input_order
from tests.framework.order.test_growth_bases import LIFE, PARENT, VIEWS
from tests.framework.order.test_input_order import _commit, _marker, _record, _tick, _world
from tests.framework.order.test_review_faults import GROWN

C, C1, V0 = ("clicks", 0), ("clicks", 1), ("views", 0)
ONE_VIEWS = TopicEntry(TopicHistory.of("views", [1]))


def _k_order(released: list[Message]) -> list[str]:
    return [f"{m.topic()}[{m.partition()}]" for m in released if m.key() == b"k"]


def test_a_held_childs_read_items_hold_back_the_other_input() -> None:
    """clicks[1] (parent read elsewhere) reads k's click at 100, then another key's click
    at 400, while its base is not known; views[0] has k's view at 300. The child's ``R`` is
    its own mark, 400, so the view (300) is released at once. The base published later is
    200: k's click's mark is max(200, 100) = 200 < 300, so canonically the click goes
    first, but the view was applied first (the Spark build and a processor that reads the
    parent too apply click, view)."""
    bases = MemoryBases()
    apart, _database, _clock = _world(clicks=GROWN, bases=bases)
    apart.follow({C1, V0})
    released = apart.take([_record(C1, 0, 100), _record(C1, 1, 400, b"other"), _record(V0, 0, 300)])
    bases.publish("clicks", 1, 0, 200)
    released += apart.take([])
    assert _k_order(released) == ["clicks[1]", "views[0]"]


def test_a_marker_read_early_and_committed_past_survives_a_restart() -> None:
    """As ``test_a_marker_read_before_the_registry_view_shows_its_step_gives_its_base_later``
    but the parent's reader is restarted (SIGKILL) after committing past the marker and
    before its view of the registry shows the growth: it resumes clicks[0] at offset 3 (past
    the marker, with mark 900). The marker was kept with the batch that passed it
    (``early_markers``), so the restarted reader finds clicks[1]'s base (500) once its view
    shows the growth, keeps it and publishes it (it used to be kept only in memory: nobody
    found it and the child's reader held it for ever)."""
    bases = MemoryBases()
    entries = {"clicks": TopicEntry(TopicHistory.of("clicks", [1])), "views": ONE_VIEWS}
    order, database, _clock = input_order(entries, bases=bases)
    order.follow({C, V0})
    order.take([*PARENT, *VIEWS])
    assert _commit(order, database)[C] == 3  # (committed past the marker, the marker kept)
    assert database.progress(GROWTH_BASE_SCOPE) == {}
    assert database.progress(EARLY_BASE_SCOPE) == {C1: 500}

    grown = {"clicks": TopicEntry(GROWN), "views": ONE_VIEWS}
    restarted, database, _clock = input_order(grown, database, bases)
    restarted.follow({C, V0})
    restarted.take([])
    _commit(restarted, database)
    restarted.take([])
    assert bases.bases == {LIFE: 500}


def test_a_marker_read_early_survives_the_parent_moving_away() -> None:
    """The parent's reader commits past clicks[1]'s marker before its registry view shows
    the growth, then a scale moves clicks[0] away (``follow`` without it). Its new reader
    resumes past the marker; the processor that read the marker keeps it (not with the
    parent: it used to forget it with the parent, and nobody found the base) and finds the
    base once its view shows the growth."""
    bases = MemoryBases()
    entries: dict[str, TopicEntry] = {
        "clicks": TopicEntry(TopicHistory.of("clicks", [1])),
        "views": ONE_VIEWS,
    }
    order, database, _clock = input_order(entries, bases=bases)
    order.follow({C, V0})
    order.take([*PARENT, *VIEWS])
    _commit(order, database)
    order.follow({V0})  # (clicks[0] released in a scale)
    entries["clicks"] = TopicEntry(GROWN)
    order.take([])
    _commit(order, database)
    order.take([])
    assert bases.bases == {LIFE: 500}


def test_a_kill_after_the_early_markers_base_is_kept_and_before_its_publish() -> None:
    """The early marker is committed past and kept; the view then shows the growth, the
    batch keeps clicks[1]'s base and clears the marker in one write, and the processor is
    killed before it publishes. Restarted, it publishes the base the state keeps (the marker
    no longer kept: nothing to find again)."""
    bases = MemoryBases()
    entries = {"clicks": TopicEntry(TopicHistory.of("clicks", [1])), "views": ONE_VIEWS}
    order, database, _clock = input_order(entries, bases=bases)
    order.follow({C, V0})
    order.take([*PARENT, *VIEWS])
    _commit(order, database)
    entries["clicks"] = TopicEntry(GROWN)
    order.take([])
    _commit(order, database)  # (the base kept, the marker cleared: then SIGKILL)
    assert bases.bases == {}
    assert database.progress(GROWTH_BASE_SCOPE) == {C1: 500}
    assert database.progress(GROWTH_LIFE_SCOPE) == {C1: 0}
    assert database.progress(EARLY_AT_SCOPE) == {}

    grown = {"clicks": TopicEntry(GROWN), "views": ONE_VIEWS}
    restarted, database, _clock = input_order(grown, database, bases)
    restarted.follow({C, V0})
    restarted.take([])
    assert bases.bases == {LIFE: 500}


def test_a_kill_before_the_batch_that_passes_an_early_marker_commits() -> None:
    """The batch that would commit clicks[0] past the early marker (and keep it) is never
    committed (SIGKILL): the restarted reader reads clicks[0] again from its start, meets
    the marker again with the view showing the growth, and finds the same base."""
    bases = MemoryBases()
    entries = {"clicks": TopicEntry(TopicHistory.of("clicks", [1])), "views": ONE_VIEWS}
    order, database, _clock = input_order(entries, bases=bases)
    order.follow({C, V0})
    order.take([*PARENT, *VIEWS])
    order.applied(database.begin())  # (written, never committed: then SIGKILL)
    assert database.progress(EARLY_AT_SCOPE) == {}

    grown = {"clicks": TopicEntry(GROWN), "views": ONE_VIEWS}
    restarted, database, _clock = input_order(grown, database, bases)
    restarted.follow({C, V0})
    restarted.take([*PARENT, *VIEWS])
    _commit(restarted, database)
    restarted.take([])
    assert bases.bases == {LIFE: 500}


def test_a_parent_resumed_without_its_mark_publishes_the_true_base() -> None:
    """A scale moved clicks[0] to this processor at F = 1 (after the click at 500; the growth
    came after the scale, so the release did not wait for clicks[1]'s threshold). The
    catch-up used to set its offset with no mark: the processor read the marker from
    NO_FLOOR and published clicks[1]'s base NO_FLOOR, where the old owner, a restart of it
    and the Spark build (``child_bases``: the parent's events up to the marker) give 500 (and
    the control log keeps the first record of a life). The catch-up now hands over its mark
    at F with the offset (``complete_offsets``: the catch-up's mark there, 500, the click's
    time: ``test_catchup_order`` checks the marks it hands over are the old owner's)."""
    bases = MemoryBases()
    entries = {"clicks": TopicEntry(GROWN), "views": ONE_VIEWS}
    order, database, _clock = input_order(entries, bases=bases)
    batch = database.begin()
    complete_offsets(database, batch, {C: 1}, marks={C: 500})  # (F, the catch-up's mark)
    batch.commit()
    order.follow({C, V0})
    order.take(PARENT[1:])
    _commit(order, database)
    order.take([])
    assert bases.bases == {LIFE: 500}


def test_a_child_built_up_to_its_lifes_start_waits_for_its_base() -> None:
    """The build's cut (``applied_prefix``, as ``applied_in_build``) stops clicks[1] at its
    life's start when its first record is held (its mark, max(base 500, 100), is above what
    views reached) and stores the mark there as NO_FLOOR: nothing of it applied. A processor
    started from that state assigns clicks[1] from its life's start with a stored mark, so
    ``ChildBases.assign`` takes NO_FLOOR as its base instead of waiting for the recorded
    one (500): k's click (100) is applied before k's view (300)."""

    cut = applied_prefix({C1: [500], V0: [300]}, ["clicks", "views"], {C1, V0})
    assert cut[C1] == Applied(0, NO_FLOOR)
    bases = MemoryBases()
    entries = {"clicks": TopicEntry(GROWN), "views": ONE_VIEWS}
    order, database, clock = input_order(entries, bases=bases)
    batch = database.begin()
    batch.set_offset("clicks", 1, cut[C1].offset)
    batch.set_progress("order-mark", "clicks", 1, cut[C1].mark)  # (the build's marks)
    batch.commit()
    order.follow({C1, V0})
    released = order.take([_record(C1, 0, 100), _record(V0, 0, 300)])
    bases.publish("clicks", 1, 0, 500)  # (the parent's reader, later)
    released += order.take([])
    for _ in range(4):  # (forced ticks as the loop writes them, read back at once)
        clock.sleep(1)
        offsets = {C1: 1, V0: 1}
        fetch = []
        for tick in order.forced_ticks(set(order._next)):
            position = (tick.topic, tick.partition)
            fetch.append(_tick(position, offsets[position], tick.floor, forced=True))
            offsets[position] += 1
        released += order.take(fetch)
    assert _k_order(released) == ["views[0]", "clicks[1]"]


def test_a_child_built_to_its_lifes_start_takes_the_base_the_build_kept() -> None:
    """As above, but the build kept clicks[1]'s base with the state (``GROWTH_BASE_SCOPE``,
    as it does now) and nobody records it (the built parent is past the marker): the child
    takes the kept base (500), so k's view (300) goes first, and the base is published."""
    bases = MemoryBases()
    entries = {"clicks": TopicEntry(GROWN), "views": ONE_VIEWS}
    order, database, _clock = input_order(entries, bases=bases)
    batch = database.begin()
    batch.set_offset("clicks", 1, 0)
    batch.set_progress("order-mark", "clicks", 1, 500)
    batch.set_progress(GROWTH_BASE_SCOPE, "clicks", 1, 500)
    batch.set_progress(GROWTH_LIFE_SCOPE, "clicks", 1, 0)
    batch.commit()
    order.follow({C1, V0})
    released = order.take([_record(C1, 0, 100), _record(V0, 0, 300)])
    released += order.take([_tick(V0, 1, 600)])
    assert _k_order(released) == ["views[0]", "clicks[1]"]
    assert bases.bases == {LIFE: 500}


def test_a_held_child_deleted_by_a_shrink_holds_back_the_other_input() -> None:
    """clicks grew to 2 (clicks[1]'s marker at offset 1 of clicks[0]) and shrank back:
    clicks[1]'s drain marker is its offset 1. This processor reads clicks[1] (not its parent):
    k's click at 100, then the drain marker, while its base is not known: clicks[1] is closed
    (``R`` ENDED) and k's view (300) is released at once. The base published later is 200:
    k's click (mark 200) goes first canonically, but it is applied after the view."""
    shrunk = TopicHistory.of("clicks", [1, 2], {1: 1}).shrunk(1, {0: 3}).with_drains({1: 1})
    bases = MemoryBases()
    apart, _database, _clock = _world(clicks=shrunk, bases=bases)
    apart.follow({C1, V0})
    drain = _marker(C1, 1, MarkerName(1, 1, 2, drain=True))
    released = apart.take([_record(C1, 0, 100), drain, _record(V0, 0, 300)])
    bases.publish("clicks", 1, 0, 200)
    released += apart.take([])
    assert _k_order(released) == ["clicks[1]", "views[0]"]


@pytest.mark.xfail(
    strict=True,
    reason="a child whose parent was read past the marker under arrival (or by a splitstate "
    "before growth_base records) waits for a growth_base record no processor writes (the "
    "operator's `splitstate order base --from-history` does: test_order_base)",
)
def test_a_child_after_a_switch_from_arrival_is_applied() -> None:
    """The app ran under ``arrival`` through the growth: clicks[0] is committed past
    clicks[1]'s marker (offset 3) with no base kept; clicks[1] was never read. Switched to
    ``canonical``: clicks[1] is read from its life's start and waits for its base; nobody
    will publish it (the parent's reader is past the marker): k's click is not applied
    until the operator runs ``splitstate order base`` (``test_order_base``)."""
    bases = MemoryBases()
    entries = {"clicks": TopicEntry(GROWN), "views": ONE_VIEWS}
    order, database, clock = input_order(entries, bases=bases)
    batch = database.begin()
    batch.set_offset("clicks", 0, 3)  # (committed under arrival)
    batch.commit()
    order.follow({C, C1, V0})
    released = order.take([_record(C1, 0, 100), _record(V0, 0, 300)])
    offsets = {C: 3, C1: 1, V0: 1}
    for _ in range(6):  # (forced ticks as the loop writes them, read back at once)
        clock.sleep(1)
        fetch = []
        for tick in order.forced_ticks(set(order._next)):
            position = (tick.topic, tick.partition)
            fetch.append(_tick(position, offsets[position], tick.floor, forced=True))
            offsets[position] += 1
        released += order.take(fetch)
        _commit(order, database)
    assert "clicks[1]" in _k_order(released)


@pytest.mark.xfail(
    strict=True,
    reason="a gate-held child whose parent another processor reads has R NO_FLOOR and gets "
    "no forced tick (not flowing): the other input waits until its gate opens",
)
def test_a_gate_held_child_apart_from_its_parent_does_not_stall_the_other_input() -> None:
    """The known fault ``time.md`` no longer lists ("a growth child ... held by its gate,
    can stall the processor while the other input is quiet") remains when the parent is
    read elsewhere (placement usually puts them apart): clicks[1] is held by its gate (not
    flowing), its base unknown, so its ``R`` is NO_FLOOR and k's view (300) waits however
    long ``max_input_wait`` passes, until the parent's reader elsewhere commits past the
    marker and the gate opens. (Waiting may be needed for the order: the fault is the
    docs' claim that it is gone.)"""
    bases = MemoryBases()
    apart, _database, clock = _world(clicks=GROWN, bases=bases)
    apart.follow({C1, V0})
    released = apart.take([_record(V0, 0, 300)])
    offset = 1
    for _ in range(5):
        clock.sleep(2)
        fetch = []
        for tick in apart.forced_ticks({V0}):  # (clicks[1]: its gate holds it)
            fetch.append(_tick((tick.topic, tick.partition), offset, tick.floor, forced=True))
            offset += 1
        released += apart.take(fetch)
    assert _k_order(released) == ["views[0]"]
