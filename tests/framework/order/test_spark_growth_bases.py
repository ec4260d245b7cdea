"""A Spark build's marks of a growth child start from its base, as the live loop's do
(``framework.bootstrap.order_marks.child_bases``; live: ``framework.runtime.growth_bases``)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from framework.bootstrap.order_cut import cut_build
from framework.bootstrap.order_marks import (
    MARK_COLUMN,
    child_starts,
    marks_and_bases,
    with_marks,
)
from framework.bootstrap.sources import parquet_history
from framework.coordination.registry import TopicEntry
from framework.growth.markers import MARKER_HEADER, MarkerName
from rebalance import TopicHistory
from tests.framework.order.appending_app import INPUTS, appending_app
from tests.framework.test_spark_fold import Row, records_table

#: a grew 1 -> 2: a[1]'s life starts at offset 0, its marker at offset 1 of a[0]
GROWN = TopicHistory.of("a", [1, 2], {1: 1})


def _event(partition: int, offset: int, key: bytes, at: int) -> Row:
    return ("a", partition, offset, key, json.dumps({"at": at}).encode(), at, None)


def _marker(partition: int, offset: int, child: int) -> Row:
    name = MarkerName(2, child, 1).marker_id("a").encode()
    return ("a", partition, offset, None, b"", 0, [{"key": MARKER_HEADER, "value": name}])


@pytest.mark.spark
def test_a_growth_childs_built_marks_start_from_its_parents_mark_at_the_marker(
    spark: SparkSession, tmp_path: Path
) -> None:
    """a[0]: 500, a[1]'s marker, 900; a[1]: 100, 700. The live loop's marks of a[1] are
    max(500, ...): 500, 700 (not 100: the base); a[0]'s are its own."""
    rows = [
        _event(0, 0, b"x", 500),
        _marker(0, 1, 1),
        _event(0, 2, b"x", 900),
        _event(1, 0, b"k", 100),
        _event(1, 1, b"k", 700),
        ("b", 0, 0, b"k", json.dumps({"at": 300}).encode(), 300, None),
    ]
    (tmp_path / "archive").mkdir()
    pq.write_table(records_table(rows), tmp_path / "archive" / "part-0.parquet")
    history = parquet_history(spark, tmp_path / "archive", list(INPUTS))
    entries = {"a": TopicEntry(GROWN), "b": TopicEntry(TopicHistory.of("b", [1]))}
    marked = with_marks(history, appending_app(), entries).collect()
    marks = {(r["topic"], r["partition"], r["offset"]): r[MARK_COLUMN] for r in marked}
    assert marks == {
        ("a", 0, 0): 500,
        ("a", 0, 1): 500,
        ("a", 0, 2): 900,
        ("a", 1, 0): 500,
        ("a", 1, 1): 700,
        ("b", 0, 0): 300,
    }
    without = with_marks(history, appending_app()).collect()  # (no registry: no bases)
    assert {r[MARK_COLUMN] for r in without if (r["topic"], r["partition"]) == ("a", 1)} == {
        100,
        700,
    }


@pytest.mark.spark
def test_a_build_stopped_at_a_childs_lifes_start_stores_its_base_or_no_mark(
    spark: SparkSession, tmp_path: Path
) -> None:
    """a[0]: 500, a[1]'s marker, 900; a[1]: 100 (mark 500); b: 300. The cut holds a[1]'s
    first record (500 > what b reached): a[1] stops at its life's start. Its mark stored
    there is its base, 500, kept as its base too (was ``NO_FLOOR``, which a processor
    started from the state took as its base); with no marker recorded, no mark at all (the
    live loop waits for the base; the build reads nothing of a[1]: its gate holds it)."""
    rows = [
        _event(0, 0, b"x", 500),
        _marker(0, 1, 1),
        _event(0, 2, b"x", 900),
        _event(1, 0, b"k", 100),
        ("b", 0, 0, b"k", json.dumps({"at": 300}).encode(), 300, None),
    ]
    (tmp_path / "archive").mkdir()
    pq.write_table(records_table(rows), tmp_path / "archive" / "part-0.parquet")
    history = parquet_history(spark, tmp_path / "archive", list(INPUTS))
    counts = {"a": 2, "b": 1}
    for grown, base in ((GROWN, 500), (TopicHistory.of("a", [1, 2]), None)):
        read = 1 if base is not None else 0  # (no marker recorded: its gate holds a[1])
        covered = {0: {("a", 0): 3, ("a", 1): read, ("b", 0): 1}}
        entries = {"a": TopicEntry(grown), "b": TopicEntry(TopicHistory.of("b", [1]))}
        marked, bases = marks_and_bases(history, appending_app(), entries)
        starts = child_starts(entries)
        cut = cut_build(marked, covered, list(INPUTS), counts, bases=bases, starts=starts)
        assert cut.covered[0][("a", 1)] == 0
        assert cut.marks[0].get(("a", 1)) == base
        assert cut.bases[0] == ({} if base is None else {("a", 1): (0, base)})
