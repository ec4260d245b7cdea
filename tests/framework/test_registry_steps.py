"""Registry records with steps (growths and shrinks), a change in progress of either kind, and
the ``compacted`` flag: written and read back, old records read as growths, and records that
do not form a history refused as malformed (``MalformedRecordError`` naming the field)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from framework.coordination.registry import Change, Growth, TopicEntry
from rebalance import TopicHistory
from rebalance.control_records import history_from_record, history_record
from rebalance.record_checks import MalformedRecordError
from rebalance.steps import Grow, Shrink


def _history() -> TopicHistory:
    history = TopicHistory.of("events", [4, 8], {4: 10, 5: 11, 6: 12, 7: 13})
    return history.shrunk(5, {1: 20, 2: 21, 3: 22}).with_drains({5: 30})


def _round_trip(entry: TopicEntry) -> TopicEntry:
    return TopicEntry.from_record(orjson.loads(orjson.dumps(entry.to_record())))


def test_an_entry_with_a_shrink_in_progress_reads_back_the_same() -> None:
    change = Change(5, 1_000, {5: 3, 6: 4, 7: 5}, {5: 30}, kind="shrink")
    entry = TopicEntry(_history(), growth=change, compacted=True)
    record = entry.to_record()
    assert record["counts"] == [4, 8, 5]
    assert record["thresholds"] == {"4": 10, "5": 11, "6": 12, "7": 13}
    assert record["steps"][1] == {
        "kind": "shrink",
        "count": 5,
        "holds": {"1": 20, "2": 21, "3": 22},
        "drains": {"5": 30},
    }
    assert record["growth"]["kind"] == "shrink" and record["compacted"] is True
    back = _round_trip(entry)
    assert back == entry
    assert back.pending() == [6, 7]  # deleted, drain markers not recorded yet
    assert back.history.deleted() == range(5, 8)


def test_pending_follows_each_partitions_last_change() -> None:
    history = _history().with_drains({6: 31, 7: 32}).grown(7, {5: 40, 6: 41})
    assert TopicEntry(history).pending() == [5, 6]  # re-grown, markers not recorded
    assert TopicEntry(history.with_markers({5: 50, 6: 51})).pending() == []
    assert TopicEntry(TopicHistory.of("t", [4, 6], {4: 1})).pending() == [5]


def test_an_old_record_reads_as_growths_with_lives_from_zero() -> None:
    old: dict[str, Any] = {
        "topic": "events",
        "initial_partitions": 4,
        "counts": [4, 6],
        "thresholds": {"4": 7},
        "key_hash": "murmur3",
        "lease_ms": 10_000,
        "delivery_timeout_ms": 30_000,
        "growth": {"partitions": 6, "recorded_ms": 5, "fence_ends": None, "markers": {"4": 7}},
    }
    entry = TopicEntry.from_record(old)
    assert entry.history.steps == (Grow(6, {4: 0, 5: 0}, {4: 7}),)
    assert entry.growth == Growth(6, 5, None, {4: 7}) and entry.growth.kind == "grow"
    assert entry.compacted is False
    assert _round_trip(entry) == entry


def _valid() -> dict[str, Any]:
    return TopicEntry(_history()).to_record()


def _with(path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    record = _valid()
    target: Any = record
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return record


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (_with(("steps", 1, "kind"), "drop"), r"steps\.1: Input tag 'drop' found using 'kind'"),
        (_with(("steps", 1, "count"), 6), r"step 2 \(8 -> 5\): the step's count is 6, not 5"),
        (_with(("steps", 1, "holds", "4"), 1), r"a hold offset for partition 4, which does not"),
        (
            _with(("steps", 1, "drains", "5"), -1),
            r"steps\.1\.shrink\.drains\.'5': Input should be greater",
        ),
        (_with(("steps", 1, "drains", "2"), 1), r"drain marker offset for partition 2"),
        (_with(("steps",), [_valid()["steps"][0]]), r"3 partition counts need 2 steps, got 1"),
        (_with(("counts",), [4, 8, 8]), r"the count equals the one before"),
        (_with(("counts",), [4, 8, 3]), r"3 partitions is below the initial count 4"),
        (_with(("thresholds", "4"), 9), r"its thresholds .* disagree with the markers"),
        (_with(("compacted",), "yes"), r"compacted: Input should be a valid boolean"),
        (_with(("growth",), {"partitions": 5, "recorded_ms": 1, "kind": "merge"}), r"growth\.kind"),
        (_with(("steps", 0, "starts"), {"4": 0}), r"no start offset for grown partition\(s\) 5"),
    ],
)
def test_records_that_form_no_history_are_malformed(record: dict[str, Any], message: str) -> None:
    with pytest.raises(MalformedRecordError, match=message):
        TopicEntry.from_record(record)


def test_a_history_with_steps_round_trips_through_the_control_log_record() -> None:
    history = _history().with_drains({6: 31, 7: 32})
    assert history_from_record("events", orjson.loads(orjson.dumps(history_record(history)))) == (
        history
    )
    old = {"counts": [4, 6], "thresholds": {"4": 3}}
    assert history_from_record("events", old) == TopicHistory.of("events", [4, 6], {4: 3})
    assert history.steps[1] == Shrink(5, {1: 20, 2: 21, 3: 22}, {5: 30, 6: 31, 7: 32})
