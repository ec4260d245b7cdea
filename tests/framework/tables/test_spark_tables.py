"""A Spark build of a table app (a table and a stream, ``time.input_order: canonical``, no
other time kept) builds the state the live loop holds (``TestDriver``): the table's versions
and what every order read, at the same offsets and marks, whichever interleaving of the two
topics the live loop saw."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from framework.bootstrap import BuildRequest, Manifest
from framework.bootstrap.build import build_state, check_orderable
from framework.bootstrap.errors import BootstrapError
from framework.coordination.registry import TopicEntry
from framework.input_times import ORDER_SCOPE
from framework.tables import table_store
from framework.testing import TestDriver
from rebalance import TopicHistory
from rebalance.positions import OffsetRange
from statestore import DatabaseIdentity, ProcessorDatabase
from tests.framework.tables.table_world import (
    INPUTS,
    PARTITIONS,
    Sent,
    drawn,
    ends_of,
    home,
    interleaved,
    send,
    stored,
    table_app,
)
from tests.framework.test_spark_fold import Row, records_table


def archive(sent: list[Sent], path: Path) -> Path:
    """The records of ``sent`` as a Parquet archive (offsets as the driver gave them)."""
    offsets = dict.fromkeys(ends_of([]), 0)
    rows: list[Row] = []
    for topic, key, at, value in sent:
        position = home(topic, key)
        rows.append((topic, position[1], offsets[position], key, value, at, None))
        offsets[position] += 1
    path.mkdir(parents=True)
    pq.write_table(records_table(rows), path / "part-0.parquet")
    return path


def build(
    spark: SparkSession, sent: list[Sent], out: Path, *, field_times: bool = False
) -> Manifest:
    """The one processor's state built by Spark from all of ``sent``."""
    ends = ends_of(sent)
    ranges = {position: OffsetRange(0, end) for position, end in ends.items()}
    request = BuildRequest(
        processors=1,
        covers={0: list(ranges)},
        ranges=ranges,
        retained=dict(ranges),
        entries={topic: TopicEntry(TopicHistory(topic, (PARTITIONS,))) for topic in INPUTS},
        archive=archive(sent, out / "archive"),
    )
    app = table_app(field_times=field_times)
    return build_state(app, request, out / "built", spark=spark)


def ingested(manifest: Manifest, path: Path) -> ProcessorDatabase:
    """The built state ingested as ``backfill`` ingests it."""
    app = table_app()
    database = ProcessorDatabase.open(
        path, DatabaseIdentity(app.config.app_id, 0), app.store_specs()
    )
    target = manifest.targets[0]
    database.bulk_load(manifest.files(0), target.offsets, progress=target.progress())
    return database


def test_a_table_app_keeping_no_other_time_may_be_built() -> None:
    app = table_app()
    check_orderable(app)  # (refused only with windows, timers or a ttl)
    app.configure(app.config.model_copy(update={"bootstrap": "spark"}))
    app.check()  # (bootstrap: spark is refused for a canonical app that keeps time only)
    app.store("expiring", ttl=1_000)
    with pytest.raises(BootstrapError, match="keeps time"):
        check_orderable(app)


@pytest.mark.spark
@pytest.mark.parametrize("field_times", [False, True])
def test_the_build_holds_the_live_state_of_any_interleaving(
    spark: SparkSession, tmp_path: Path, field_times: bool
) -> None:
    """``field_times``: the event times are fields, the Kafka timestamps (a tombstone's
    among them) far ahead of them."""
    sent = drawn(seed=7, count=150, field_times=field_times)
    arrivals = (sent, interleaved(sent, 8))
    lives = [send(TestDriver(table_app(field_times=field_times)), a) for a in arrivals]
    expected = stored(lives[0].database)
    assert stored(lives[1].database) == expected
    assert {store for store, _key in expected} == {"seen", table_store("customers")}
    manifest = build(spark, sent, tmp_path, field_times=field_times)
    database = ingested(manifest, tmp_path / "db")
    try:
        assert stored(database) == expected
        assert database.offsets() == lives[0].offsets()  # (held records not applied)
        assert database.progress(ORDER_SCOPE) == lives[0].database.progress(ORDER_SCOPE)
    finally:
        database.close()
