"""A record that kills the process running the function ("killer": it exits, segfaults, is
killed for memory) in a Spark fold, as the processors' crash guards treat it.

The live loop and a receiver's catch-up skip a record once it killed them ``crash_limit``
times on its own (``on_error: stop``: they stop instead, naming it). A Spark fold runs the
same function over the same records, so a killer kills Spark's Python worker each time; the
job must then build what the replay builds (the record skipped, nothing else lost) or, with
``on_error: stop``, fail naming the record and the fix. Real local Spark, ``local[2]``.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from framework.app import App
from framework.bootstrap import AppFold, BootstrapError, BootstrapPlan, Manifest, run_bootstrap
from framework.bootstrap.history import lineage_ranks
from framework.coordination.registry import TopicEntry
from framework.processing import RecordProcessor, StoredMessage
from rebalance import TopicHistory, bucket, key_hash
from statestore import DatabaseIdentity, ProcessorDatabase
from tests.framework.killer_app import PARTITIONS, make_app
from tests.framework.test_spark_fold import Row
from tests.framework.test_spark_job import _ddl

pytestmark = pytest.mark.spark

B = 2
HISTORIES = {"events": TopicHistory.of("events", [PARTITIONS])}
ENTRIES = {"events": TopicEntry(HISTORIES["events"])}


def history(deaths: Path, killers: int = 1) -> tuple[list[Row], list[tuple[str, int, int]]]:
    """400 records of 20 keys, ``killers`` of them killers (which log to ``deaths``)."""
    rng = random.Random(11)
    offsets = [0] * PARTITIONS
    rows: list[Row] = []
    killed: list[tuple[str, int, int]] = []
    chosen = set(rng.sample(range(50, 350), killers))
    for index in range(400):
        key = f"k{rng.randrange(20):02d}".encode()
        partition = bucket(key_hash(key), B, PARTITIONS)
        offset = offsets[partition]
        offsets[partition] += 1
        value = f"die:{deaths}" if index in chosen else str(rng.randrange(100))
        if index in chosen:
            killed.append(("events", partition, offset))
        header = [{"key": "splitstate.count", "value": str(PARTITIONS).encode()}]
        rows.append(("events", partition, offset, key, value.encode(), 1_700_000_000_000, header))
    return rows, killed


def replay(app: App, rows: list[Row], skipped: list[tuple[str, int, int]]) -> list[Any]:
    """The state the catch-up builds: every record in offset order, restore mode, the
    killers skipped (as its crash guard skips them)."""
    processor = RecordProcessor(app, {"events": PARTITIONS}, histories=HISTORIES)
    database = ProcessorDatabase.in_memory(
        DatabaseIdentity("killer", -1, {"initial_processors": B}), app.store_specs()
    )
    for topic, partition, offset, key, value, stamp, headers in sorted(
        rows, key=lambda r: (r[1], r[2])
    ):
        if (topic, partition, offset) in skipped:
            continue
        pairs = [(h["key"], h["value"]) for h in headers] if headers else None
        batch = database.begin()
        processor.process(
            batch, StoredMessage(topic, partition, offset, key, value, stamp, pairs), restore=True
        )
        batch.commit()
    return sorted(database.backend.scan("counts"))


def build(spark: SparkSession, app: App, rows: list[Row], directory: Path) -> Manifest:
    plan = BootstrapPlan(
        initial_processors=B,
        processors=2,
        targets=frozenset({0, 1}),
        lineage=lineage_ranks(app.config, ENTRIES),
        covered={0: {}, 1: {}},
        shards=3,
        crash_limit=app.config.crash_limit,
        stop_on_crash=app.config.on_error == "stop",
    )
    frame = spark.createDataFrame(rows, _ddl()).repartition(2)
    fold = AppFold(app, {"events": PARTITIONS}, HISTORIES, B)
    return run_bootstrap(spark, frame, plan, fold, directory)


def built(app: App, manifest: Manifest, directory: Path) -> list[Any]:
    items: list[Any] = []
    for j in (0, 1):
        identity = DatabaseIdentity("killer", j, {"initial_processors": B})
        with ProcessorDatabase.open(directory / f"db-{j}", identity, app.store_specs()) as db:
            db.bulk_load(manifest.files(j), manifest.targets[j].offsets)
            items.extend(db.backend.scan("counts"))
    return sorted(items)


def test_a_killer_record_is_skipped_as_the_crash_guard_skips_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    app = make_app(crash_limit=3)
    deaths = tmp_path / "deaths"
    rows, killers = history(deaths, killers=2)
    manifest = build(spark, app, rows, tmp_path / "out")
    assert built(app, manifest, tmp_path) == replay(app, rows, killers)
    assert sorted((s.topic, s.partition, s.offset) for s in manifest.skipped) == sorted(killers)
    assert {s.crashes for s in manifest.skipped} == {3}
    died = deaths.read_text().splitlines()
    for topic, partition, offset in killers:  # alone crash_limit times (and once amid others)
        assert died.count(f"{topic}[{partition}]@{offset}") in (3, 4), died


def test_with_on_error_stop_the_job_fails_naming_the_record_and_the_fix(
    spark: SparkSession, tmp_path: Path
) -> None:
    app = make_app(on_error="stop", crash_limit=2)
    rows, (killer,) = history(tmp_path / "deaths")
    with pytest.raises(BootstrapError) as failed:
        build(spark, app, rows, tmp_path / "out")
    message = str(failed.value)
    topic, partition, offset = killer
    assert f"{topic}[{partition}]@{offset}" in message, message
    assert "killed" in message and "on_error: dead-letter" in message, message
    assert not (tmp_path / "out").exists()
