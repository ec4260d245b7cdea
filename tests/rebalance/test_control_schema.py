"""The control log's record schema (``rebalance.control_schema``): a record of a known kind
that does not fit it is refused, never coerced, ignored or half applied; a record of an
unknown kind is ignored; fields a schema does not name are left out."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from rebalance import HandoffEvent
from rebalance.control import ControlState, Generation, handoff_record
from rebalance.control_records import InputGrowth, SnapshotRequest, abort_record, instance_record
from rebalance.control_schema import KINDS, check_record
from rebalance.control_stops import Stop, format_record, resumed_record, stopped_record
from rebalance.record_checks import MalformedRecordError
from tests.rebalance.test_control import APP, COUNTS, scale, started


def _ready() -> ControlState:
    """2 processors scaling to 3 in a format-2 log: processor 2 READY to receive from 0."""
    state = scale(started(2).apply(format_record(2)), 1, 3)
    state = state.apply(instance_record(0, "s")).apply(instance_record(2, "a"))
    for event in (HandoffEvent.START_CATCH_UP, HandoffEvent.CAUGHT_UP):
        state = state.apply(handoff_record(1, 0, 2, event, instance="a"))
    return state


def _stopped() -> ControlState:
    return _ready().apply(stopped_record(1, 2, "x", at=("words", 2, 5), instance="a"))


GROWTH = InputGrowth("words", 16)

#: a valid record of each kind, with a state it applies to
VALID: list[tuple[ControlState, dict[str, Any]]] = [
    (ControlState(), APP.to_record()),
    (ControlState().apply(APP.to_record()), Generation(0, 2).to_record()),
    (
        started(2),
        {
            "type": "scale",
            "generation": 1,
            "processors": 3,
            "partitions": COUNTS,
            "histories": {"words": {"counts": [8], "thresholds": {}}},
            "request": "r",
        },
    ),
    (
        _ready(),
        handoff_record(
            1, 0, 2, HandoffEvent.RELEASE, {("words", 2): 4, ("words", 6): 5}, instance="s"
        ),
    ),
    (_ready(), abort_record(1, "why")),
    (_ready(), stopped_record(1, 2, "x", at=("words", 2, 5), instance="a")),
    (_stopped(), resumed_record(1, 2, Stop("x", ("words", 2, 5), "a"), request="op")),
    (started(2), InputGrowth("words", 16, "g").to_record()),
    (started(2).apply(GROWTH.to_record()), GROWTH.to_record(done=True)),
    (started(2), {"type": "metadata_hash", "hash": -5}),
    (started(2), {"type": "growth_base", "topic": "words", "partition": 9, "start": 0, "base": -5}),
    (started(2), SnapshotRequest("id", 1).to_record()),
    (started(2), instance_record(1, "z")),
    (started(2), format_record(2)),
]

#: values no field of any kind takes
WRONG = [None, "x", "3", [], {}, -1, 2**63, 1.5, True, [["a"]], [[1, 2, 3]], {"a": "b"}]


def test_every_kind_has_a_valid_record_here() -> None:
    assert {record["type"] for _state, record in VALID} == KINDS


@pytest.mark.parametrize(("state", "record"), VALID, ids=[r["type"] for _s, r in VALID])
def test_a_valid_record_applies(state: ControlState, record: dict[str, Any]) -> None:
    assert check_record(record) == record
    after = state.apply(record)
    assert after.ignored == state.ignored


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({"type": "generation", "generation": "1", "processors": 2}, "generation"),
        ({"type": "generation", "generation": 1.0, "processors": 2}, "generation"),
        ({"type": "generation", "generation": True, "processors": 2}, "generation"),
        ({"type": "generation", "generation": 0, "processors": 0}, "processors"),
        ({"type": "generation", "generation": -1, "processors": 2}, "generation"),
        ({"type": "generation", "generation": 2**31, "processors": 2}, "generation"),
        ({"type": "metadata_hash", "hash": 2**64 - 1}, "hash"),
        (
            {"type": "growth_base", "topic": "w", "partition": 1, "start": 0, "base": 2**62},
            "base",
        ),
        ({"type": "app", "app_id": "a", "initial_processors": 2, "inputs": {}}, "inputs"),
        ({"type": "app", "app_id": ["a"], "initial_processors": 2, "inputs": {"w": 8}}, "app_id"),
        ({"type": "handoff", "generation": 1, "source": 0, "target": 2}, "event"),
        (
            {"type": "handoff", "generation": 1, "source": 0, "target": 2, "event": "LEAVE"},
            "not a handoff event",
        ),
        (
            {"type": "handoff", "generation": 1, "source": 0, "target": 2, "event": "RELEASE"},
            "a RELEASE gives the offsets",
        ),
        (
            {
                "type": "handoff",
                "generation": 1,
                "source": 0,
                "target": 2,
                "event": "RELEASE",
                "offsets": [["words", 2, -4]],
            },
            "offsets.0.2",
        ),
        (
            {
                "type": "scale",
                "generation": 1,
                "processors": 3,
                "partitions": COUNTS,
                "histories": {"words": {"counts": [8], "thresholds": {"08": 1}}},
            },
            "histories.words.thresholds.'08'",
        ),
        ({"type": "resumed", "generation": 1, "processor": 2, "by": "someone"}, "by"),
        ({"type": "resumed", "generation": 1, "processor": 2, "stop_at": "x"}, "stop_at"),
        ({"type": "stopped", "generation": 1, "processor": 2, "at": ["w", 1]}, "at"),
        ({"type": "snapshot", "processor": 1}, "request"),
        ({"type": None}, "its type is None"),
        ({"type": ["scale"]}, "its type is"),
    ],
)
def test_a_record_that_does_not_fit_its_schema_is_refused_naming_the_field(
    record: dict[str, Any], field: str
) -> None:
    with pytest.raises(MalformedRecordError, match=field):
        check_record(record)
    with pytest.raises(MalformedRecordError, match=field):
        started(2).apply(record)


def test_a_refusal_escapes_what_the_writer_wrote() -> None:
    record = {"type": "app", "app_id": "a", "initial_processors": 2, "inputs": {"\x1b[2J": "x"}}
    with pytest.raises(MalformedRecordError) as refused:
        check_record(record)
    assert "\x1b" not in str(refused.value) and r"'\x1b[2J'" in str(refused.value)


def test_a_record_of_an_unknown_kind_is_ignored_and_noted() -> None:
    state = started(2)
    after = state.apply({"type": "from-a-later-version", "generation": "x"})
    assert after == state.apply({"type": "from-a-later-version"})
    assert after.ignored[-1] == "unknown record type 'from-a-later-version'"
    assert after.generation == state.generation


def test_fields_a_schema_does_not_name_are_left_out() -> None:
    record = {**instance_record(1, "z"), "written_by": "a later version", "processor_name": 7}
    assert check_record(record) == instance_record(1, "z")
    assert started(2).apply(record).instances == {1: "z"}


def _mutations(record: dict[str, Any]) -> list[dict[str, Any]]:
    """``record`` with each field left out, and with each field set to each ``WRONG``
    value."""
    fields = [name for name in record if name != "type"]
    out: list[dict[str, Any]] = [{k: v for k, v in record.items() if k != name} for name in fields]
    for name, value in itertools.product(fields, WRONG):
        out.append({**record, name: value})
    return out


@pytest.mark.parametrize(("state", "record"), VALID, ids=[r["type"] for _s, r in VALID])
def test_a_mutated_record_is_refused_or_applied_as_written(
    state: ControlState, record: dict[str, Any]
) -> None:
    """Each mutation is refused with ``MalformedRecordError``, or fits its schema and is
    applied or ignored by the rules; nothing else is raised, and what is applied keeps the
    JSON type it was written with."""
    for mutated in _mutations(record):
        try:
            after = state.apply(mutated)
        except MalformedRecordError:
            continue
        after.owned(0, COUNTS)
        after.has_work(2)
        checked = check_record(mutated)
        assert checked is not None
        for name, value in checked.items():
            if isinstance(mutated.get(name), int | str):
                assert type(value) is type(mutated[name]), (mutated, name)
