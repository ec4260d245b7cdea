"""The checks of a compacted input (``tests/sim/compacted.py``) accept what a rebuild from a
compacted log may hold and nothing else."""

from __future__ import annotations

from framework.time.ticks import tick_headers
from tests.sim.app import COMPACTION_APPLIED, DELETE_HEADER
from tests.sim.broker import StoredRecord
from tests.sim.compacted import (
    check_latest_state,
    compaction_tombstone,
    named,
    previous_problem,
    values_before,
)


def _record(offset: int, value: str | None, delete: str | None = None) -> StoredRecord:
    headers = () if delete is None else ((DELETE_HEADER, delete.encode()),)
    raw = None if value is None else value.encode()
    return StoredRecord("in", 0, offset, b"k", raw, headers, 0, "p")


A, B, GONE, C = (
    _record(0, "p:1"),
    _record(1, "p:2:huge"),
    _record(2, None, "p:3"),
    _record(3, "p:4"),
)
RECORDS = [A, B, GONE, C]


def test_the_value_before_a_record_is_the_one_before_it_when_the_log_holds_that_one() -> None:
    assert values_before(RECORDS, 1, lambda _r: True) == {"p:1"}
    assert values_before(RECORDS, 0, lambda _r: True) == {None}
    assert values_before(RECORDS, 3, lambda _r: True) == {None}  # after a delete: none


def test_past_records_the_cleaner_removed_an_earlier_value_or_none_may_be_held() -> None:
    kept = {A.offset}
    assert values_before(RECORDS, 3, lambda r: r.offset in kept) == {None, "p:2", "p:1"}
    assert values_before(RECORDS, 3, lambda _r: False) == {None, "p:2", "p:1"}


def test_an_output_naming_a_later_or_unknown_value_or_a_compaction_tombstone_is_a_problem() -> None:
    allowed = values_before(RECORDS, 1, lambda _r: True)
    where = ("in", 0, 1)
    assert previous_problem(where, "p:1", "p", allowed) is None
    assert previous_problem(where, "p:4", "p", allowed) is not None
    assert previous_problem(where, None, "p", allowed) is not None
    assert previous_problem(where, None, COMPACTION_APPLIED, {None}) is not None


def test_the_state_must_be_what_the_records_leave() -> None:
    problems: list[str] = []
    states = {b"k": {"v": "p:4"}}
    check_latest_state({b"k": RECORDS}, states.get, lambda _k: 0, lambda _r: True, problems.append)
    assert problems == []
    check_latest_state(
        {b"k": RECORDS[:3]}, states.get, lambda _k: 0, lambda _r: True, problems.append
    )
    assert len(problems) == 1 and "a delete" in problems[0]


def test_a_compaction_tombstone_is_named_by_no_producer() -> None:
    tombstone = StoredRecord("in", 0, 5, b"k", None, (("splitstate.compaction", b"in/1"),), 0, "p")
    assert compaction_tombstone(tombstone) and named(tombstone) is None
    assert not compaction_tombstone(GONE) and named(GONE) == "p:3"


def test_a_tick_is_named_by_no_producer() -> None:
    # (the runtime's ticks hold an empty value, the simulation's ticker's none)
    for value in (b"", None):
        tick = StoredRecord("in", 0, 6, None, value, tuple(tick_headers(5, 5)), 0, "processor-0#1")
        assert named(tick) is None
