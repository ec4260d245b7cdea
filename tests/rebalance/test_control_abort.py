"""Abandoning a scale (``abort``) and a receiver that stopped (``stopped``), in the control
state machine: everyone applies them the same way, and an abort is all or nothing."""

from __future__ import annotations

from typing import Any

from rebalance import HandoffEvent, HandoffPhase
from rebalance.control import ControlState, Generation, handoff_record
from tests.rebalance.test_control import COUNTS, event, scale, started


def abort_record(generation: int, reason: str) -> dict[str, Any]:
    """What `splitstate scale --abort` writes (spelled out: the format is the contract)."""
    return {"type": "abort", "generation": generation, "reason": reason}


def _reasons(state: ControlState) -> dict[int, str]:
    assert state.scaling is not None
    return {j: stop.reason for j, stop in state.scaling.stopped.items()}


def test_an_abort_before_any_release_ends_the_scale_and_keeps_the_old_owners() -> None:
    state = scale(started(2), 1, 3)
    state = event(state, 1, 0, 2, HandoffEvent.START_CATCH_UP)
    state = event(state, 1, 0, 2, HandoffEvent.CAUGHT_UP)
    state = state.apply(abort_record(1, "history lost to retention"))
    assert state.scaling is None
    assert state.scale is not None and state.scale.aborted == "history lost to retention"
    assert {h.phase for h in state.scale.handoffs.values()} == {HandoffPhase.ABORTED}
    assert state.generation == Generation(0, 2)
    assert state.owned(0, COUNTS) == {("words", p) for p in (0, 2, 4, 6)}
    assert not state.has_work(2)  # the joiner stops
    # a RELEASE the old owner wrote after reading READY loses to the abort before it
    late = state.apply(
        handoff_record(1, 0, 2, HandoffEvent.RELEASE, {("words", 2): 4, ("words", 6): 4})
    )
    assert late.scaling is None and late.owned(0, COUNTS) == state.owned(0, COUNTS)
    assert len(late.ignored) == len(state.ignored) + 1
    # the next scale takes the next generation number: 1 is used up
    assert state.next_generation == 2
    assert scale(state, 1, 3).scaling is None
    again = scale(state, 2, 3)
    assert again.scaling is not None and again.scaling.generation == 2


def test_an_abort_after_a_release_is_ignored_as_a_whole() -> None:
    state = scale(started(2), 1, 4)
    for source, target in ((0, 2), (1, 3)):
        state = event(state, 1, source, target, HandoffEvent.START_CATCH_UP)
        state = event(state, 1, source, target, HandoffEvent.CAUGHT_UP)
    state = state.apply(
        handoff_record(1, 0, 2, HandoffEvent.RELEASE, {("words", 2): 9, ("words", 6): 9})
    )
    after = state.apply(abort_record(1, "operator"))
    assert after.scaling is not None and after.scaling.aborted is None
    assert after.scaling.handoffs[(1, 3)].phase is HandoffPhase.READY  # nothing half-aborted
    assert "already released" in after.ignored[-1]


def test_a_stopped_receiver_is_shown_until_it_moves_again() -> None:
    state = scale(started(2), 1, 3)
    state = state.apply(
        {"type": "stopped", "generation": 1, "processor": 2, "reason": "retention deleted"}
    )
    assert _reasons(state) == {2: "retention deleted"}
    ignored = state.apply({"type": "stopped", "generation": 1, "processor": 0, "reason": "x"})
    assert ignored.scaling is not None and 0 not in ignored.scaling.stopped
    state = event(state, 1, 0, 2, HandoffEvent.START_CATCH_UP)
    assert state.scaling is not None and state.scaling.stopped == {}


def test_a_release_to_a_receiver_that_stopped_first_is_ignored_and_the_scale_can_abort() -> None:
    # the old owner read READY, decided to release, and its RELEASE landed after the
    # receiver's stop (its catch-up met history retention had deleted): the stop came first,
    # so the source keeps its partitions and the scale can still be abandoned (simulation
    # seed 258: the RELEASE wiped the stop, and the scale could neither finish nor abort)
    state = scale(started(2), 1, 3)
    state = event(state, 1, 0, 2, HandoffEvent.START_CATCH_UP)
    state = event(state, 1, 0, 2, HandoffEvent.CAUGHT_UP)
    state = state.apply(
        {"type": "stopped", "generation": 1, "processor": 2, "reason": "retention deleted"}
    )
    offsets = {("words", 2): 4, ("words", 6): 4}
    late = state.apply(handoff_record(1, 0, 2, HandoffEvent.RELEASE, offsets, request="r1"))
    assert late.scaling is not None
    assert late.scaling.handoffs[(0, 2)].phase is HandoffPhase.READY
    assert _reasons(late) == {2: "retention deleted"}
    assert late.scaling.refused == {"r1"}  # how the source knows to take its partitions back
    assert "stopped" in late.ignored[-1]
    assert late.owned(0, COUNTS) == state.owned(0, COUNTS)
    aborted = late.apply(abort_record(1, "the receiver stopped"))
    assert aborted.scaling is None and aborted.generation == Generation(0, 2)
    # a log written before RELEASEs carried an id replays as it did then
    legacy = state.apply(handoff_record(1, 0, 2, HandoffEvent.RELEASE, offsets))
    assert legacy.scaling is not None
    assert legacy.scaling.handoffs[(0, 2)].phase is HandoffPhase.RELEASED
