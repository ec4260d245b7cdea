"""A compacted input's change announced before its count is recorded (issue 34, review
finding 3): its registry record, how readers see it, and what status shows."""

from __future__ import annotations

from typing import Any, Literal

import pytest

from framework.coordination.registry import Announcement, Growth, TopicEntry
from framework.growth.placement import LinearHashPartitioner
from framework.ops.topic_status import topic_status
from rebalance import TopicHistory
from rebalance.record_checks import MalformedRecordError

GROWN = TopicHistory("in", (4,)).grown(8, dict.fromkeys(range(4, 8), 0))


def _announced(partitions: int = 5, kind: Literal["grow", "shrink"] = "shrink") -> TopicEntry:
    history = GROWN.with_markers(dict.fromkeys(range(4, 8), 10))
    return TopicEntry(history, compacted=True, announced=Announcement(partitions, kind, 1000))


def test_an_announced_change_is_read_back_and_nothing_of_it_is_recorded() -> None:
    entry = _announced()
    read = TopicEntry.from_record(entry.to_record())
    assert read == entry and read.changing
    assert read.growth is None and read.pending() == [] and read.partitions == 8


def test_a_record_without_the_field_has_no_announced_change() -> None:
    record = _announced().to_record()
    del record["announced"]
    read = TopicEntry.from_record(record)
    assert read.announced is None and not read.changing


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"kind": "shrink", "partitions": 8, "announced_ms": 0}, "announced.partitions"),
        ({"kind": "grow", "partitions": 5, "announced_ms": 0}, "announced.kind"),
        ({"kind": "shrink", "partitions": 200_000, "announced_ms": 0}, "announced.partitions"),
    ],
)
def test_an_announced_change_that_disagrees_with_the_history_is_refused(
    change: dict[str, Any], field: str
) -> None:
    record = {**_announced().to_record(), "announced": change}
    with pytest.raises(MalformedRecordError, match=field):
        TopicEntry.from_record(record)


def test_an_announced_change_beside_a_recorded_one_is_refused() -> None:
    entry = TopicEntry(GROWN, compacted=True, growth=Growth(8, 0))
    record = {**entry.to_record(), "announced": {"kind": "shrink", "partitions": 5,
                                                 "announced_ms": 0}}  # fmt: skip
    with pytest.raises(MalformedRecordError, match="announced: a change is announced"):
        TopicEntry.from_record(record)


def test_producers_place_with_the_count_before_and_write_no_tombstone() -> None:
    partitioner = LinearHashPartitioner({"in": _announced()})
    assert partitioner.partitions("in") == 8
    assert partitioner.earlier_homes("in", b"k") is None


def test_status_shows_the_change_announced() -> None:
    lines = topic_status(_announced(), {}, {}).render()
    assert lines[-1] == (
        "  shrinking to 5: announced, count not recorded yet (a compacted input waits a "
        "fence first; `splitstate expand` running, or run it again to resume)"
    )
