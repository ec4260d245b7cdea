"""A tick whose window result kills the process, in a Spark fold, as the processors treat it.

The processors drop the killing item (a key's window result, or timer) after it killed them
``crash_limit`` times at a tick, and apply the rest of the tick (``framework.runtime
.tick_guard``). A Spark fold applies the same ticks to each key, so the item kills Spark's
Python worker each time: the job must then drop it too and build what the replay builds
(was: a death in a tick was a death between records, and after ``crash_limit`` of them the
build failed). Real local Spark, ``local[2]``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from framework import App, AppConfig, Count, Record, Tumbling, WindowResult
from framework.bootstrap import AppFold, BootstrapPlan, run_bootstrap
from framework.bootstrap.history import lineage_ranks
from framework.bootstrap.tick_table import TickTable
from framework.coordination.registry import TopicEntry
from framework.processing import RecordProcessor, StoredMessage
from framework.time.ticks import tick_headers
from rebalance import TopicHistory, bucket, key_hash
from statestore import DatabaseIdentity, ProcessorDatabase
from tests.framework.test_spark_fold import Row
from tests.framework.test_spark_job import _ddl

pytestmark = pytest.mark.spark

B, PARTITIONS, TOPIC = 2, 2, "events"
HISTORIES = {TOPIC: TopicHistory.of(TOPIC, [PARTITIONS])}
ENTRIES = {TOPIC: TopicEntry(HISTORIES[TOPIC])}
KEYS = [f"k{i:02d}".encode() for i in range(12)]
KILLER = KEYS[5]


def window_app(deaths: Path | None) -> App:
    """A count of each key's 10 s windows; with ``deaths``, the result of ``KILLER``'s
    windows logs to it and ends the process as a crash would."""
    config = AppConfig.load(
        None,
        app_id="killer-ticks",
        kafka={"bootstrap_servers": "127.0.0.1:9"},
        inputs=[{"topic": TOPIC, "partitions": PARTITIONS}],
        outputs=[{"topic": "counts"}],
        initial_processors=B,
        processors=B,
        crash_limit=2,
        spark={"shards": 3},
    )
    app = App(config)

    def result(window: WindowResult) -> dict[str, Any]:
        if deaths is not None and window.key == KILLER:
            with deaths.open("a") as log:
                log.write(f"{window.key!r}\n")
            os._exit(3)
        return {"start": window.start, "value": window.value}

    @app.window(TOPIC, Tumbling(10_000), Count(), result=result)
    def count(record: Record[bytes]) -> int:
        return 1

    return app


def history() -> list[Row]:
    """Three records of each key in its partition, then a tick in each partition that closes
    every key's first window, then one more record of each key."""
    offsets = [0] * PARTITIONS
    rows: list[Row] = []

    def append(key: bytes | None, at: int, partition: int, headers: list[Any]) -> None:
        rows.append((TOPIC, partition, offsets[partition], key, b"1", at, headers))
        offsets[partition] += 1

    count = [{"key": "splitstate.count", "value": str(PARTITIONS).encode()}]
    for at in (1_000, 4_000, 7_000):
        for key in KEYS:
            append(key, at, bucket(key_hash(key), B, PARTITIONS), count)
    for partition in range(PARTITIONS):
        tick = [
            {"key": name, "value": value} for name, value in tick_headers(10_500, 0, "killer-ticks")
        ]
        append(None, 0, partition, tick)
    for key in KEYS:
        append(key, 12_000, bucket(key_hash(key), B, PARTITIONS), count)
    return rows


def replay(app: App, rows: list[Row]) -> list[Any]:
    """Every record and tick in offset order, restore mode (no result runs, none kills)."""
    processor = RecordProcessor(app, {TOPIC: PARTITIONS}, histories=HISTORIES)
    database = ProcessorDatabase.in_memory(
        DatabaseIdentity("killer-ticks", -1, {"initial_processors": B}), app.store_specs()
    )
    for topic, partition, offset, key, value, stamp, headers in sorted(
        rows, key=lambda r: (r[1], r[2])
    ):
        pairs = [(h["key"], h["value"]) for h in headers] if headers else None
        batch = database.begin()
        message = StoredMessage(topic, partition, offset, key, value, stamp, pairs)
        processor.process(batch, message, restore=True)
        batch.commit()
    return sorted(
        item
        for store in ("splitstate.time", "splitstate.due")
        for item in database.backend.scan(store)
    )


def test_a_ticks_killing_window_is_dropped_as_the_processors_drop_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    deaths = tmp_path / "deaths"
    app = window_app(deaths)
    rows = history()
    keyless = [(t, p, o, hs) for t, p, o, k, _v, _s, hs in rows if k is None]
    pairs = [(t, p, o, [(h["key"], h["value"]) for h in hs or []]) for t, p, o, hs in keyless]
    ticks = TickTable.of(pairs, app=app.config.app_id)
    plan = BootstrapPlan(
        initial_processors=B,
        processors=B,
        targets=frozenset({0, 1}),
        lineage=lineage_ranks(app.config, ENTRIES),
        covered={0: {}, 1: {}},
        shards=3,
        crash_limit=app.config.crash_limit,
    )
    frame = spark.createDataFrame(rows, _ddl()).repartition(2)
    fold = AppFold(app, {TOPIC: PARTITIONS}, HISTORIES, B, ticks)
    manifest = run_bootstrap(spark, frame, plan, fold, tmp_path / "out")
    [dropped] = manifest.skipped
    assert (dropped.key, dropped.crashes) == (KILLER, 2)
    assert dropped.item is not None and dropped.item[1:4] == (10_000, 1, "count")
    died = deaths.read_text().splitlines()
    assert len(died) in (2, 3), died  # alone crash_limit times (and once in the worker)
    built: list[Any] = []
    for j in (0, 1):
        identity = DatabaseIdentity("killer-ticks", j, {"initial_processors": B})
        with ProcessorDatabase.open(tmp_path / f"db-{j}", identity, app.store_specs()) as db:
            db.bulk_load(manifest.files(j), manifest.targets[j].offsets)
            built += [
                item
                for store in ("splitstate.time", "splitstate.due")
                for item in db.backend.scan(store)
            ]
    assert sorted(built) == replay(window_app(None), rows)
