"""The Spark build of an app that orders its inputs canonically (``time.input_order:
canonical``) applies each key's records in the order the live loop does, and stores each
partition's mark at the built offsets, so a processor resuming from the built state goes on in
the same order.

The live reference is ``TestDriver`` (it applies records as the live loop's merge buffer
releases them). The app appends each record it applies to its key's state, so any difference
in order shows; the records' times are drawn so that the canonical order and the order of
arrival (and that of the topics one after the other) differ.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from framework.bootstrap import BuildRequest, Manifest
from framework.bootstrap.build import build_state
from framework.coordination.registry import TopicEntry
from framework.input_times import ORDER_SCOPE
from framework.order import NO_FLOOR
from framework.testing import TestDriver
from rebalance import TopicHistory
from rebalance.positions import OffsetRange, Position
from statestore import DatabaseIdentity, ProcessorDatabase, TypedCodec
from statestore.key_layout import KeyLayout
from tests.framework.order.appending_app import INPUTS, PARTITIONS, appending_app
from tests.framework.order.appending_world import (
    Sent,
    applied,
    drawn,
    driven,
    ends_of,
    go_on,
    held_after,
    home,
    send,
)
from tests.framework.test_spark_fold import Row, records_table


def archive(sent: list[Sent], path: Path) -> Path:
    """The records of ``sent`` as a Parquet archive (offsets as the driver gave them)."""
    offsets = dict.fromkeys(ends_of([]), 0)
    rows: list[Row] = []
    for topic, key, at in sent:
        position = home(topic, key)
        value = json.dumps({"at": at}).encode()
        rows.append((topic, position[1], offsets[position], key, value, at, None))
        offsets[position] += 1
    path.mkdir(parents=True)
    pq.write_table(records_table(rows), path / "part-0.parquet")
    return path


def build(spark: SparkSession, sent: list[Sent], ends: dict[Position, int], out: Path) -> Manifest:
    """The one processor's state built by Spark from ``sent``, up to ``ends``."""
    ranges = {position: OffsetRange(0, end) for position, end in ends.items()}
    request = BuildRequest(
        processors=1,
        covers={0: list(ranges)},
        ranges=ranges,
        retained={p: OffsetRange(0, end) for p, end in ends_of(sent).items()},
        entries={topic: TopicEntry(TopicHistory(topic, (PARTITIONS,))) for topic in INPUTS},
        archive=archive(sent, out / "archive"),
    )
    return build_state(appending_app(), request, out / "built", spark=spark)


def ingested(manifest: Manifest, path: Path, *, marks: bool = True) -> ProcessorDatabase:
    """The built state ingested as ``backfill`` ingests it (``marks``: with the marks)."""
    app = appending_app()
    database = ProcessorDatabase.open(
        path, DatabaseIdentity(app.config.app_id, 0), app.store_specs()
    )
    target = manifest.targets[0]
    progress = target.progress() if marks else None
    database.bulk_load(manifest.files(0), target.offsets, progress=progress)
    return database


def built_state(database: ProcessorDatabase) -> dict[bytes, str]:
    layout, codec = KeyLayout(1), TypedCodec(str)
    return {layout.user(key): codec.decode(raw) for key, raw in database.backend.scan("applied")}


@pytest.mark.spark
def test_the_build_applies_each_keys_records_in_the_live_canonical_order(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Built from the whole log (as ``backfill --until now``), the state stops where the live
    loop's does: the last records wait for a record of the other input that may precede them,
    and are applied after it once the processor goes on."""
    sent = drawn(seed=3, count=120)
    live = driven(sent)
    assert live.pending  # (the last records wait for the other input, as live)
    expected = applied(live)
    assert expected != applied(driven(sent, "arrival"))  # the order matters here
    manifest = build(spark, sent, ends_of(sent), tmp_path)
    database = ingested(manifest, tmp_path / "db")
    try:
        assert built_state(database) == expected
        assert database.offsets() == live.offsets()  # (held records not applied)
        live_marks = live.database.progress(ORDER_SCOPE)
        assert database.progress(ORDER_SCOPE) == live_marks
        assert all(mark > NO_FLOOR for mark in live_marks.values())
    finally:
        database.close()


@pytest.mark.spark
def test_a_driver_resuming_from_the_built_state_goes_on_as_the_live_one(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The built offsets and marks are where the live loop stopped; resumed there (the
    records held past the offsets read again), the driver commits what the live one commits,
    record after record: state, offsets and marks. Without the built marks the partitions'
    marks start over, and the marks it stores are not the live ones."""
    sent, cut = drawn(seed=5, count=120), 60
    live = driven(sent[:cut])
    ends = live.offsets()

    steps = go_on(live, sent[cut:])
    manifest = build(spark, sent, ends_of(sent[:cut]), tmp_path)
    assert manifest.targets[0].offsets == ends
    held = held_after(sent[:cut], ends)  # what a processor resuming at ``ends`` reads again
    assert held
    followed = {}
    for marks in (True, False):
        database = ingested(manifest, tmp_path / f"db-{marks}", marks=marks)
        try:
            resumed = send(TestDriver(appending_app(), database=database), held)
            followed[marks] = go_on(resumed, sent[cut:]) == steps
        finally:
            database.close()
    assert followed == {True: True, False: False}
