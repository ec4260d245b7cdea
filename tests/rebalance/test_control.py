"""The control log's state machine: scales and handoffs, applied the same way by everyone."""

from __future__ import annotations

from typing import Any

from rebalance import HandoffEvent, HandoffPhase
from rebalance.control import AppDefinition, ControlState, Generation, handoff_record

APP = AppDefinition("wc", 2, {"words": 8})
COUNTS = {"words": 8}


def started(processors: int = 2) -> ControlState:
    state = ControlState()
    for record in (APP.to_record(), Generation(0, processors).to_record()):
        state = state.apply(record)
    return state


def scale(state: ControlState, generation: int, processors: int) -> ControlState:
    record = {
        "type": "scale",
        "generation": generation,
        "processors": processors,
        "partitions": COUNTS,
    }
    return state.apply(record)


def event(
    state: ControlState, g: int, s: int, t: int, e: HandoffEvent, **offsets: Any
) -> ControlState:
    released = {("words", int(p)): o for p, o in offsets.items()} if offsets else None
    return state.apply(handoff_record(g, s, t, e, released))


def test_scale_out_walks_the_catch_up_protocol() -> None:
    state = scale(started(), 1, 3)
    assert state.scaling is not None
    handoff = state.scaling.handoffs[(0, 2)]
    assert handoff.partitions == (("words", 2), ("words", 6))
    assert state.owned(0, COUNTS) == {("words", p) for p in (0, 2, 4, 6)}
    assert state.owned(2, COUNTS) == set()
    assert state.has_work(2)

    state = event(state, 1, 0, 2, HandoffEvent.START_CATCH_UP)
    state = event(state, 1, 0, 2, HandoffEvent.CAUGHT_UP)
    assert state.scaling is not None
    assert state.scaling.handoffs[(0, 2)].phase is HandoffPhase.READY
    state = state.apply(
        handoff_record(1, 0, 2, HandoffEvent.RELEASE, {("words", 2): 40, ("words", 6): 41})
    )
    assert state.owned(0, COUNTS) == {("words", 0), ("words", 4)}
    assert state.owned(2, COUNTS) == set()  # not before it completes
    assert state.scaling is not None
    assert state.scaling.handoffs[(0, 2)].released == {("words", 2): 40, ("words", 6): 41}
    state = event(state, 1, 0, 2, HandoffEvent.COMPLETE)
    assert state.scaling is None
    assert state.generation == Generation(1, 3)
    assert state.owned(2, COUNTS) == {("words", 2), ("words", 6)}
    assert state.ignored == ()


def test_invalid_records_are_ignored_and_noted() -> None:
    state = scale(started(), 1, 3)
    state = event(state, 1, 0, 2, HandoffEvent.RELEASE, **{"2": 1, "6": 1})  # not READY
    assert "event RELEASE is not allowed in phase PLANNED" in state.ignored[-1]
    state = scale(state, 2, 4)
    assert "while generation 1 is in progress" in state.ignored[-1]
    state = event(state, 1, 1, 2, HandoffEvent.START_CATCH_UP)
    assert "has no handoff 1 -> 2" in state.ignored[-1]
    state = event(state, 0, 0, 2, HandoffEvent.START_CATCH_UP)
    assert "generation 0, which is not in progress" in state.ignored[-1]
    bad = started().apply({"type": "scale", "generation": 1, "processors": 9, "partitions": COUNTS})
    assert "processors (9) cannot exceed the input partitions (8)" in bad.ignored[-1]
    assert bad.scaling is None
    stale = started().apply(
        {"type": "scale", "generation": 3, "processors": 3, "partitions": COUNTS}
    )
    assert "generation 1 was expected" in stale.ignored[-1]


def test_release_must_name_exactly_the_moved_partitions() -> None:
    state = scale(started(), 1, 3)
    for e in (HandoffEvent.START_CATCH_UP, HandoffEvent.CAUGHT_UP):
        state = event(state, 1, 0, 2, e)
    state = event(state, 1, 0, 2, HandoffEvent.RELEASE, **{"2": 5})
    assert "RELEASE must give the offsets of exactly" in state.ignored[-1]


def test_scale_in_leaving_processor_stops_having_work_once_released() -> None:
    state = started(3)
    state = scale(state, 1, 2)
    assert state.scaling is not None
    assert list(state.scaling.handoffs) == [(2, 0)]
    assert state.has_work(2)
    for e in (HandoffEvent.START_CATCH_UP, HandoffEvent.CAUGHT_UP):
        state = event(state, 1, 2, 0, e)
    state = event(state, 1, 2, 0, HandoffEvent.RELEASE, **{"2": 7, "6": 9})
    assert not state.has_work(2)
    assert state.has_work(0)
    state = event(state, 1, 2, 0, HandoffEvent.COMPLETE)
    assert state.generation == Generation(1, 2)
    assert state.owned(0, COUNTS) == {("words", p) for p in (0, 2, 4, 6)}
    assert not state.has_work(2)


def test_every_reader_agrees() -> None:
    records = [
        APP.to_record(),
        Generation(0, 2).to_record(),
        {"type": "scale", "generation": 1, "processors": 5, "partitions": COUNTS},
        handoff_record(1, 0, 2, HandoffEvent.START_CATCH_UP),
        handoff_record(1, 1, 3, HandoffEvent.START_CATCH_UP),
        handoff_record(1, 0, 2, HandoffEvent.RELEASE, {("words", 2): 1, ("words", 6): 1}),
        handoff_record(1, 0, 4, HandoffEvent.START_CATCH_UP),
    ]
    first, second = ControlState(), ControlState()
    for record in records:
        first = first.apply(record)
    for record in list(records):
        second = second.apply(dict(record))
    assert first == second
    assert len(first.ignored) == 1  # the RELEASE before READY


def growth(topic: str, partitions: int, request: str, done: bool = False) -> dict[str, Any]:
    kind = "growth_done" if done else "growth"
    return {"type": kind, "topic": topic, "partitions": partitions, "request": request}


def test_racing_scale_requests_only_the_first_in_log_order_is_accepted() -> None:
    first = {"type": "scale", "generation": 1, "processors": 3, "partitions": COUNTS}
    second = {"type": "scale", "generation": 1, "processors": 4, "partitions": COUNTS}
    state = started().apply({**first, "request": "a"}).apply({**second, "request": "b"})
    assert state.scaling is not None
    assert state.scaling.request == "a"
    assert state.scaling.new_processors == 3
    assert "while generation 1 is in progress" in state.ignored[-1]


def test_a_scale_is_ignored_while_an_input_grows() -> None:
    state = started().apply(growth("words", 12, "g1"))
    state = scale(state, 1, 3)
    assert state.scaling is None
    assert "while input topic 'words' grows to 12 partitions" in state.ignored[-1]
    state = state.apply(growth("words", 12, "g1", done=True))
    state = scale(state, 1, 3)
    assert state.scaling is not None
    assert state.scaling.generation == 1


def test_a_growth_is_ignored_while_a_scale_or_another_growth_is_in_progress() -> None:
    scaling = scale(started(), 1, 3).apply(growth("words", 12, "g1"))
    assert scaling.growth is None
    assert "while generation 1 is in progress" in scaling.ignored[-1]

    state = started().apply(growth("words", 12, "g1")).apply(growth("words", 16, "g2"))
    assert state.growth is not None
    assert (state.growth.partitions, state.growth.request) == (12, "g1")
    assert "a growth of 'words' to 12 partitions is in progress" in state.ignored[-1]
    resumed = state.apply(growth("words", 12, "g3"))  # a rerun of the same expand: adopted
    assert resumed.growth == state.growth
    wrong = state.apply(growth("words", 16, "g2", done=True))
    assert wrong.growth == state.growth
    assert "growth_done of 'words' to 16" in wrong.ignored[-1]
    stale = state.apply(growth("words", 12, "g0", done=True))  # a stale run's, same count
    assert stale.growth == state.growth
    assert "growth_done of request g0, not the one in progress" in stale.ignored[-1]
    unnamed = {"type": "growth_done", "topic": "words", "partitions": 12}  # before ids
    assert state.apply(unnamed).growth is None
    done = state.apply(growth("words", 12, "g1", done=True))
    assert done.growth is None
