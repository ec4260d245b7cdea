"""The protocol state machines: every listed transition works, anything else is refused."""

from __future__ import annotations

import itertools
from enum import StrEnum
from typing import Any

import pytest

from rebalance import (
    HANDOFF_MACHINE,
    PARTITION_MACHINE,
    PROCESSOR_MACHINE,
    HandoffEvent,
    HandoffPhase,
    InvalidTransitionError,
    PartitionEvent,
    PartitionState,
    ProcessorEvent,
    ProcessorPhase,
    StateMachine,
)


def test_catch_up_protocol_happy_path() -> None:
    phase = HandoffPhase.PLANNED
    for event in (
        HandoffEvent.START_BOOTSTRAP,
        HandoffEvent.BOOTSTRAPPED,
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
                HandoffPhase.BOOTSTRAPPING,
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


def test_processor_lifecycle_out_and_in_and_out_again() -> None:
    phase = ProcessorPhase.NEW
    for event in (
        ProcessorEvent.JOIN,
        ProcessorEvent.ACTIVATE,
        ProcessorEvent.LEAVE,
        ProcessorEvent.STOP,
        ProcessorEvent.REJOIN,
        ProcessorEvent.JOIN,
    ):
        phase = PROCESSOR_MACHINE.apply(phase, event)
    assert phase is ProcessorPhase.JOINING
    with pytest.raises(InvalidTransitionError, match="event LEAVE is not allowed in state JOINING"):
        PROCESSOR_MACHINE.apply(phase, ProcessorEvent.LEAVE)


def test_partition_lifecycle() -> None:
    state = PartitionState.NON_EXISTENT
    for event in (
        PartitionEvent.CREATE,
        PartitionEvent.SET_THRESHOLD,
        PartitionEvent.UNBLOCK,
        PartitionEvent.MARK_FOR_DELETION,
        PartitionEvent.DRAINED,
    ):
        state = PARTITION_MACHINE.apply(state, event)
    assert state is PartitionState.DELETED
    with pytest.raises(InvalidTransitionError, match="event UNBLOCK is not allowed in state New"):
        PARTITION_MACHINE.apply(PartitionState.NEW, PartitionEvent.UNBLOCK)


@pytest.mark.parametrize(
    ("machine", "states", "events"),
    [
        (HANDOFF_MACHINE, HandoffPhase, HandoffEvent),
        (PROCESSOR_MACHINE, ProcessorPhase, ProcessorEvent),
        (PARTITION_MACHINE, PartitionState, PartitionEvent),
    ],
)
def test_table_is_the_whole_truth(
    machine: StateMachine[Any, Any], states: type[StrEnum], events: type[StrEnum]
) -> None:
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
