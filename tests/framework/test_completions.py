"""``Completions``: which handoffs into this processor its directory holds (it completed
them, or was created after them), which it missed, and the tidying of ended catch-ups."""

from __future__ import annotations

from framework.runtime.completions import Completions, holds_flag
from rebalance import HandoffEvent
from rebalance.control import ControlState, handoff_record
from statestore import DatabaseIdentity, ProcessorDatabase, StoreSpec
from statestore.layout import CRASH_CATCHUP_ATTEMPT_PREFIX, META_STORE
from tests.rebalance.test_control import scale, started
from tests.sim.disks import KeptBackend

IDENTITY = DatabaseIdentity("wc", 2, {"initial_processors": 2})
MOVED = {("words", 2): 5, ("words", 6): 5}  # 2 -> 3 moves partitions 2 and 6 to processor 2


def _completed_scale() -> ControlState:
    state = scale(started(2), 1, 3)
    for event in (HandoffEvent.START_CATCH_UP, HandoffEvent.CAUGHT_UP):
        state = state.apply(handoff_record(1, 0, 2, event))
    state = state.apply(handoff_record(1, 0, 2, HandoffEvent.RELEASE, MOVED))
    state = state.apply(handoff_record(1, 0, 2, HandoffEvent.COMPLETE))
    assert state.scaling is None and state.processors == 3
    return state


def _database(stores: dict[str, dict[bytes, bytes]]) -> ProcessorDatabase:
    return ProcessorDatabase.in_memory(IDENTITY, [StoreSpec("counts")], KeptBackend(stores))


def test_a_directory_tracked_during_a_scale_misses_a_handoff_another_run_completed() -> None:
    stores: dict[str, dict[bytes, bytes]] = {}
    database = _database(stores)
    during = scale(started(2), 1, 3)
    completions = Completions(2, database, during)
    assert completions.tracked_from == 1  # the scale in progress is tracked
    missed = completions.missed(_completed_scale())
    assert [(g, h.source, h.target) for g, h in missed] == [(1, 0, 2)]
    # completed here (CatchUp.complete writes the flag with F): nothing missed
    batch = database.begin()
    batch.set_flag(holds_flag(1, 0))
    batch.commit()
    assert Completions(2, _database(stores), during).missed(_completed_scale()) == []


def test_a_new_directory_notes_what_it_holds_and_is_not_stale_again() -> None:
    stores: dict[str, dict[bytes, bytes]] = {}
    state = _completed_scale()
    completions = Completions(2, _database(stores), state)
    assert completions.tracked_from == 2  # after the newest ended scale: nothing before
    assert completions.missed(state) == []
    # opened when the scale was in progress, then it completed elsewhere
    other: dict[str, dict[bytes, bytes]] = {}
    early = Completions(2, _database(other), scale(started(2), 1, 3))
    missed = early.missed(state)
    early.mark(missed)  # what StateDirectory does for a directory that holds nothing
    assert Completions(2, _database(other), state).missed(state) == []


def test_a_directory_from_before_completions_were_tracked_is_not_stale() -> None:
    stores: dict[str, dict[bytes, bytes]] = {}
    old = _database(stores)
    old.checked_fresh()  # a directory a run of an older splitstate used
    old.close()
    reopened = _database(stores)
    assert not reopened.created and not reopened.fresh
    state = _completed_scale()
    assert Completions(2, reopened, state).missed(state) == []


def test_an_ended_catch_ups_bookkeeping_is_deleted_once() -> None:
    database = _database({})
    batch = database.begin()
    batch.set_progress("catchup-1", "words", 2, 4)
    batch.set_progress("catchup-1-from-0", "words", 2, 3)
    batch.set_progress("catchup-1-mark", "words", 2, 1_500)  # (a canonical app's marks)
    batch.set_progress("catchup-1-from-0-mark", "words", 2, 1_400)
    batch.set_progress("catchup-11", "words", 2, 9)  # another generation's: kept
    batch.set_flag("catchup-1-cleared")
    batch.commit()
    attempt = CRASH_CATCHUP_ATTEMPT_PREFIX + b"catchup-1"
    database.backend.write({META_STORE: [(attempt, b'{"ranges": []}')]})
    Completions(2, database, ControlState()).tidy(_completed_scale())
    assert database.progress("catchup-1") == {}
    assert database.progress("catchup-1-from-0") == {}
    assert database.progress("catchup-1-mark") == {}
    assert database.progress("catchup-1-from-0-mark") == {}
    assert database.progress("catchup-11") == {("words", 2): 9}
    assert not database.has_flag("catchup-1-cleared")
    assert database.backend.get(META_STORE, attempt) is None
