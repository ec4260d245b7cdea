"""Review: a compacted input's ticks have a key of their own (``tick_key``), and every reader
applies them (the live loop, a catch-up: ``tests/framework/test_keyed_ticks.py``). The Spark
build must read them too: ``collect_ticks`` kept only keyless records, so a build of a
compacted input left every window open and every timer unfired that the processors closed and
fired; and an archive without a ``headers`` column that holds keyed ticks was not refused."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from framework.bootstrap import ArchiveError
from framework.bootstrap.sources import check_archive_ticks
from framework.bootstrap.tick_table import collect_ticks
from framework.time.ticks import TICK_HEADER, tick_headers, tick_key
from tests.framework.test_spark_fold import records_table
from tests.framework.time.apps import new_app

app = new_app(partitions=2)


def _headers(floor: int, by: str | None = None) -> list[dict[str, object]]:
    return [{"key": name, "value": value} for name, value in tick_headers(floor, floor, by)]


@pytest.mark.spark
def test_the_build_reads_a_compacted_inputs_keyed_ticks(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = records_table(
        [
            ("in", 0, 0, b"k", b"{}", 1, None),
            ("in", 0, 1, None, b"", 5, _headers(5_000)),  # a keyless tick
            ("in", 1, 0, tick_key("in", "abc"), b"", 7, _headers(7_000)),  # a compacted one's
            # a keyed record of another key with the header is no tick (``is_tick_record``)
            ("in", 1, 1, b"other", b"", 8, _headers(8_000)),
            ("in", 1, 2, None, b"", 9, _headers(9_000, "another-app")),  # passed over
            ("in", 1, 3, None, b"", 9, _headers(9_500, app.config.app_id)),  # its own
        ]
    )
    pq.write_table(table, tmp_path / "history.parquet")
    history = spark.read.parquet(str(tmp_path / "history.parquet"))
    ticks = collect_ticks(history, app.config.app_id)
    assert sorted(ticks.partitions) == [("in", 0), ("in", 1)]
    assert ticks.tick(("in", 1), 0) == (0, 7_000, 7_000, None)
    assert ticks.tick(("in", 1), 1) == (3, 9_500, 9_500, None)
    assert len(ticks) == 3 and ticks.malformed == 0


@pytest.mark.spark
def test_an_archive_of_keyed_ticks_without_headers_is_refused(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = records_table([("in", 1, 0, tick_key("in", "abc"), b"", 7, None)]).drop_columns(
        ["headers"]
    )
    pq.write_table(table, tmp_path / "history.parquet")
    with pytest.raises(ArchiveError, match=TICK_HEADER):
        check_archive_ticks(spark, tmp_path)
