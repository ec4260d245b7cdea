"""Offset ranges for bulk builds: --until parsing, retention checks, archives, lineage order."""

from __future__ import annotations

import pytest

from framework import AppConfig
from framework.bootstrap.history import (
    HistoryError,
    archive_ranges,
    check_kafka_ranges,
    lineage_ranks,
    parse_until,
)
from framework.coordination.registry import TopicEntry
from rebalance import TopicHistory
from rebalance.positions import OffsetRange

POSITIONS = [("words", 0), ("words", 1)]


def test_until_names_every_partition() -> None:
    assert parse_until("words:0=10, words:1=0", POSITIONS) == {("words", 0): 10, ("words", 1): 0}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("words:0=10", "leaves out words[1]"),
        ("words:0=ten,words:1=3", "is not TOPIC:PARTITION=OFFSET"),
        ("words0=1,words:1=3", "is not TOPIC:PARTITION=OFFSET"),
        ("words:0=1,words:1=3,words:2=5", "words[2], which is not an input partition"),
        ("words:0=-1,words:1=3", "negative"),
    ],
)
def test_bad_until_is_refused_with_the_fix(text: str, message: str) -> None:
    with pytest.raises(HistoryError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_until(text, POSITIONS)


def test_kafka_ranges_must_be_retained_whole() -> None:
    retained = {("words", 0): OffsetRange(0, 100), ("words", 1): OffsetRange(40, 90)}
    check_kafka_ranges({("words", 0): OffsetRange(0, 100)}, retained, "Kafka")
    with pytest.raises(HistoryError) as error:
        check_kafka_ranges(
            {("words", 0): OffsetRange(0, 120), ("words", 1): OffsetRange(0, 90)},
            retained,
            "Kafka",
        )
    text = str(error.value)
    assert "words[0]: asked up to offset 120, but the partition ends at 100" in text
    assert "words[1]: needs offsets from 0, but Kafka retains only 40..90" in text
    assert "--source parquet" in text


def test_archive_ranges_clip_to_the_archive_and_refuse_gaps() -> None:
    wanted = {("words", 0): OffsetRange(0, 100), ("words", 1): OffsetRange(0, 50)}
    archived = {("words", 0): OffsetRange(0, 80), ("words", 1): OffsetRange(0, 60)}
    assert archive_ranges(wanted, archived, exact=False) == {
        ("words", 0): OffsetRange(0, 80),
        ("words", 1): OffsetRange(0, 50),
    }
    with pytest.raises(HistoryError, match=r"words\[0\] ends at offset 80 in the archive"):
        archive_ranges(wanted, archived, exact=True)
    late = {("words", 0): OffsetRange(5, 80), ("words", 1): OffsetRange(0, 60)}
    with pytest.raises(HistoryError, match=r"words\[0\] starts at offset 5 in the archive"):
        archive_ranges(wanted, late, exact=False)
    extra = {**archived, ("words", 7): OffsetRange(0, 3)}
    with pytest.raises(HistoryError, match=r"it holds words\[7\]"):
        archive_ranges(wanted, extra, exact=False)


def test_lineage_ranks_put_ancestors_first_and_topics_in_config_order() -> None:
    config = AppConfig.load(
        None,
        app_id="lineage",
        inputs=[{"topic": "a", "partitions": 4}, {"topic": "b", "partitions": 2}],
        initial_processors=2,
    )
    entries = {
        "a": TopicEntry(TopicHistory.of("a", [4, 6, 8], {4: 10, 5: 11, 6: 12, 7: 13})),
        "b": TopicEntry(TopicHistory.of("b", [2])),
    }
    ranks = lineage_ranks(config, entries)
    # 4 -> 6 (markers of 4, 5 in 0, 1 at 10, 11) -> 8 (markers of 6, 7 in 2, 3 at 12, 13)
    assert ranks[("a", 0)] == ((0, 11), (0, 1))  # step 1 in force past 4's marker
    assert ranks[("a", 2)] == ((0, 13), (0, 2))
    assert ranks[("a", 4)] == ((0,), (1,))  # created by step 1, from offset 0
    assert ranks[("a", 7)] == ((0,), (2,))
    assert ranks[("b", 0)] == ranks[("b", 1)] == ((0,), (3,))  # above a's 3 counts
    # a key of partition 6 (split from 2) has records in 2 before 6 (up to its marker)
    assert ranks[("a", 2)][1][0] < ranks[("a", 6)][1][0]
