"""Instances, stops and resumes in the control state machine: only a processor's newest run
moves a scale on; a stop ends only with ``resumed`` (format 2); a log in a newer format is
refused as a whole."""

from __future__ import annotations

from typing import Any

import pytest

from rebalance import HandoffEvent, HandoffPhase
from rebalance.control import ControlState, handoff_record
from rebalance.control_records import instance_record
from rebalance.control_stops import (
    CONTROL_FORMAT,
    format_record,
    resumed_record,
    stopped_record,
)
from rebalance.record_checks import MalformedRecordError
from tests.rebalance.test_control import COUNTS, scale, started

RELEASED = {("words", 2): 7, ("words", 6): 7}


def _format2(*runs: tuple[int, str]) -> ControlState:
    """A format-2 log of 2 processors scaling to 3 (processor 2 receives from 0), with the
    processors' runs ``(processor, instance)`` recorded in that order."""
    state = scale(started(2).apply(format_record(2)), 1, 3)
    for processor, instance in runs:
        state = state.apply(instance_record(processor, instance))
    return state


def _event(
    state: ControlState, event: HandoffEvent, instance: str | None, **extra: Any
) -> ControlState:
    offsets = RELEASED if event is HandoffEvent.RELEASE else None
    return state.apply(handoff_record(1, 0, 2, event, offsets, instance=instance, **extra))


def _phase(state: ControlState) -> HandoffPhase:
    assert state.scaling is not None
    return state.scaling.handoffs[(0, 2)].phase


def test_only_the_newest_run_of_a_processor_moves_its_handoffs() -> None:
    # run a of processor 2 catches up; a second copy b starts (a mistaken second pod)
    state = _format2((0, "s"), (2, "a"))
    state = _event(state, HandoffEvent.START_CATCH_UP, "a")
    assert _phase(state) is HandoffPhase.CATCHING_UP
    state = state.apply(instance_record(2, "b"))
    # what a writes from now on is ignored by every reader: its COMPLETE cannot take over
    stale = _event(state, HandoffEvent.CAUGHT_UP, "a")
    assert _phase(stale) is HandoffPhase.CATCHING_UP
    assert "not its newest" in stale.ignored[-1]
    state = _event(state, HandoffEvent.CAUGHT_UP, "b")
    state = _event(state, HandoffEvent.RELEASE, "s", request="r")  # the source's run writes it
    assert _phase(state) is HandoffPhase.RELEASED
    state = _event(state, HandoffEvent.COMPLETE, "a")
    assert _phase(state) is HandoffPhase.RELEASED and state.owned(2, COUNTS) == set()
    state = _event(state, HandoffEvent.COMPLETE, "b")
    assert state.scaling is None and state.owned(2, COUNTS) == set(RELEASED)


def test_a_release_is_its_sources_and_a_replaced_source_cannot_release() -> None:
    state = _format2((0, "s1"), (2, "r"))
    for event in (HandoffEvent.START_CATCH_UP, HandoffEvent.CAUGHT_UP):
        state = _event(state, event, "r")
    state = state.apply(instance_record(0, "s2"))  # the source restarted
    assert _phase(_event(state, HandoffEvent.RELEASE, "s1", request="x")) is HandoffPhase.READY
    # a RELEASE stamped with the receiver's run is not the source's either
    assert _phase(_event(state, HandoffEvent.RELEASE, "r", request="y")) is HandoffPhase.READY
    assert _phase(_event(state, HandoffEvent.RELEASE, "s2", request="z")) is HandoffPhase.RELEASED


def test_format_2_needs_an_instance_and_format_1_replays_as_it_did() -> None:
    state = _format2((2, "a"))
    unsigned = _event(state, HandoffEvent.START_CATCH_UP, None)
    assert _phase(unsigned) is HandoffPhase.PLANNED
    assert "without an instance" in unsigned.ignored[-1]
    # a log written before format records: records without an instance still apply
    legacy = scale(started(2), 1, 3)
    assert legacy.format == 1
    assert _phase(_event(legacy, HandoffEvent.START_CATCH_UP, None)) is HandoffPhase.CATCHING_UP


def test_a_stop_ends_only_with_resumed_in_format_2() -> None:
    state = _format2((0, "s"), (2, "a"))
    for event in (HandoffEvent.START_CATCH_UP, HandoffEvent.CAUGHT_UP):
        state = _event(state, event, "a")
    at = ("words", 2, 41)
    state = state.apply(stopped_record(1, 2, "the function failed", at=at, instance="a"))
    assert state.scaling is not None and state.scaling.stopped[2].at == at
    # the stopped run cannot resume itself; a handoff event does not end the stop either
    assert 2 in _resumed(state, "a").stopped
    state = state.apply(instance_record(2, "b"))  # restarted after a fix
    assert 2 in _resumed(state, "a").stopped  # (the old run is not the newest any more)
    assert 2 not in _resumed(state, "b").stopped
    # a RELEASE while stopped is refused (the source keeps its partitions)
    refused = _event(state, HandoffEvent.RELEASE, "s", request="r1")
    assert _phase(refused) is HandoffPhase.READY and refused.scaling is not None
    assert refused.scaling.refused == {"r1"}


def test_a_whole_processor_stop_is_resumed_only_by_an_operator() -> None:
    state = _format2((2, "a"))
    state = _event(state, HandoffEvent.START_CATCH_UP, "a")
    state = state.apply(stopped_record(1, 2, "history lost", at=None, instance="a"))
    state = state.apply(instance_record(2, "b"))
    stop = state.scaling.stopped[2]  # type: ignore[union-attr]
    itself = state.apply(resumed_record(1, 2, stop, instance="b"))
    assert itself.scaling is not None and 2 in itself.scaling.stopped
    assert "only an operator" in itself.ignored[-1]
    by_operator = state.apply(resumed_record(1, 2, stop, request="op"))
    assert by_operator.scaling is not None and by_operator.scaling.stopped == {}
    # in a format-1 log any event of the receiver ended its stop, as it did then
    legacy = scale(started(2), 1, 3)
    legacy = legacy.apply({"type": "stopped", "generation": 1, "processor": 2, "reason": "x"})
    legacy = _event(legacy, HandoffEvent.START_CATCH_UP, None)
    assert legacy.scaling is not None and legacy.scaling.stopped == {}


def _resumed(state: ControlState, instance: str) -> Any:
    assert state.scaling is not None
    after = state.apply(resumed_record(1, 2, state.scaling.stopped[2], instance=instance))
    assert after.scaling is not None
    return after.scaling


def test_a_log_in_a_newer_format_is_refused_as_a_whole() -> None:
    state = _format2((2, "a"))
    newer = state.apply(format_record(CONTROL_FORMAT + 1))
    assert newer.unreadable == CONTROL_FORMAT + 1
    assert "upgrade splitstate" in newer.ignored[-1]
    after = _event(newer, HandoffEvent.START_CATCH_UP, "a")
    assert after == newer  # nothing after it applies


def test_a_malformed_record_is_refused_not_ignored() -> None:
    """Every reader refuses it the same way (``rebalance.control_schema`` says why): none
    skips it and acts on the rest of the log."""
    state = _format2((2, "a"))
    for record in (
        {"type": "handoff", "generation": 1},
        {"type": "stopped", "generation": "x", "processor": 2, "instance": "a"},
        {"type": "instance", "processor": "two", "instance": "c"},
    ):
        with pytest.raises(MalformedRecordError, match="does not fit"):
            state.apply(record)
    with pytest.raises(MalformedRecordError, match="generation: Field required"):
        started(2).apply({"type": "scale", "processors": 3})
