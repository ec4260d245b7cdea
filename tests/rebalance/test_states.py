"""The handoff state machine: every listed transition works, anything else is refused."""

from __future__ import annotations

import itertools

import pytest

from rebalance import HANDOFF_MACHINE, HandoffEvent, HandoffPhase, InvalidTransitionError


def test_catch_up_protocol_happy_path() -> None:
    phase = HandoffPhase.PLANNED
    for event in (
        HandoffEvent.START_CATCH_UP,
        HandoffEvent.CAUGHT_UP,
        HandoffEvent.RELEASE,
        HandoffEvent.COMPLETE,
    ):
        phase = HANDOFF_MACHINE.apply(phase, event)
    assert phase is HandoffPhase.COMPLETE


def test_abort_only_before_release() -> None:
    for phase in HandoffPhase:
        allowed = HANDOFF_MACHINE.can_apply(phase, HandoffEvent.ABORT)
        assert allowed == (
            phase
            in {
                HandoffPhase.PLANNED,
                HandoffPhase.CATCHING_UP,
                HandoffPhase.READY,
            }
        )


def test_invalid_transition_names_state_event_and_allowed() -> None:
    with pytest.raises(InvalidTransitionError) as caught:
        HANDOFF_MACHINE.apply(HandoffPhase.CATCHING_UP, HandoffEvent.RELEASE)
    message = str(caught.value)
    assert "handoff: event RELEASE is not allowed in state CATCHING_UP" in message
    assert "allowed events: CAUGHT_UP, ABORT" in message
    with pytest.raises(InvalidTransitionError, match=r"allowed events: none \(final state\)"):
        HANDOFF_MACHINE.apply(HandoffPhase.COMPLETE, HandoffEvent.ABORT)


def test_table_is_the_whole_truth() -> None:
    machine, states, events = HANDOFF_MACHINE, HandoffPhase, HandoffEvent
    for state, event in itertools.product(states, events):
        if (state, event) in machine.table:
            assert machine.apply(state, event) is machine.table[(state, event)]
        else:
            with pytest.raises(InvalidTransitionError):
                machine.apply(state, event)
    # Every state is reachable from the first one.
    start = next(iter(states))
    reached = {start}
    frontier = [start]
    while frontier:
        current = frontier.pop()
        for (source, _), target in machine.table.items():
            if source == current and target not in reached:
                reached.add(target)
                frontier.append(target)
    assert reached == set(states)
