"""Review (time, 2): the Spark build of an app that keeps time, on a compacted input.

On a compacted input a tick has a key of its own (``<topic>/splitstate.tick/<id>``,
``framework.time.ticks.tick_key``): Kafka refuses keyless records there. Every runtime path
reads such a record as a tick (``is_tick_record``); the Spark build must too, or the keys it
builds miss every tick the live owners applied (their windows stay open, their timers do not
fire), and a processor continuing from the built state emits what the live one already did.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from framework.bootstrap import ArchiveError
from framework.bootstrap.tick_table import collect_ticks
from framework.time.ticks import TICK_HEADER, tick_key
from tests.framework.test_spark_fold import records_table
from tests.framework.test_spark_time import app, build, ingested, readable
from tests.framework.timed_app import TOPIC, History, live_run, make_history, state_items


def keyed_ticks(log: History) -> History:
    """``log`` with every tick keyed as on a compacted input (each with an id of its own)."""
    written = []
    for partition, offset, key, value, stamp, headers in log.written:
        tick = key is None and any(name == TICK_HEADER for name, _ in headers)
        keyed = tick_key(TOPIC, f"{partition}-{offset}") if tick else key
        written.append((partition, offset, keyed, value, stamp, headers))
    log.written = written
    return log


def archive(log: History, path: Path) -> Path:
    path.mkdir(parents=True)
    pq.write_table(records_table(log.rows()), path / "part-0.parquet")
    return path


@pytest.mark.spark
def test_the_ticks_of_a_compacted_input_are_collected(spark: SparkSession, tmp_path: Path) -> None:
    log = keyed_ticks(make_history())
    history = spark.read.parquet(str(archive(log, tmp_path / "archive")))
    table = collect_ticks(history, app.config.app_id)
    assert len(table) == len(log.ticks)


@pytest.mark.spark
def test_a_build_on_a_compacted_input_gives_every_key_the_time_state_of_the_live_run(
    spark: SparkSession, tmp_path: Path
) -> None:
    log = keyed_ticks(make_history())
    live, _outputs = live_run(app, log, log.written)
    expected = state_items(live, app)
    manifest = build(spark, log, archive(log, tmp_path / "archive"), log.ends, tmp_path / "out")
    built = []
    for database in ingested(manifest, tmp_path):
        built += state_items(database, app)
        database.close()
    assert readable(built) == readable(expected)


@pytest.mark.spark
def test_an_archive_without_headers_is_refused_when_it_holds_keyed_ticks(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A compacted input's ticks have keys: without headers they would be folded as records
    of their tick keys instead (was: accepted, every tick lost)."""
    log = keyed_ticks(make_history())
    table = records_table([row for row in log.rows() if row[3] is not None])
    (tmp_path / "archive").mkdir()
    pq.write_table(table.drop_columns(["headers"]), tmp_path / "archive" / "part-0.parquet")
    with pytest.raises(ArchiveError, match="no 'headers' column"):
        build(spark, log, tmp_path / "archive", log.ends, tmp_path / "out")
