"""The Spark build of an app that keeps time gives every key the time state live owners give it.

The history (``timed_app.make_history``) has ticks in the input partitions, out-of-order and
late records and a growth 2 -> 4 in the middle. Every key's stores after the build --
``splitstate.time`` (its windows, timers, expiries, time), ``splitstate.due`` and the user
stores -- must be the bytes the live run (``timed_app.live_run``) leaves, and a processor that
continues from the built state must emit what the live processor emits from there, once.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from framework.bootstrap import ArchiveError, BuildRequest, Manifest
from framework.bootstrap.build import build_state
from framework.time.key_clock import TIME_STORE, KeyClock
from rebalance import bucket, key_hash
from rebalance.positions import OffsetRange
from statestore import DatabaseIdentity, ProcessorDatabase
from statestore.due_index import DUE_STORE, NEVER
from statestore.key_layout import KeyLayout
from tests.framework.test_spark_fold import records_table
from tests.framework.timed_app import (
    TOPIC,
    B,
    History,
    live_run,
    make_history,
    new_processor,
    state_items,
    timed_app,
)

app = timed_app()


def readable(items: list[tuple[str, bytes, bytes]]) -> dict[tuple[str, bytes], object]:
    """Items by (store, user key), time records decoded (a failure shows what differs)."""
    layout = KeyLayout(B)
    found: dict[tuple[str, bytes], object] = {}
    for store, key, raw in items:
        value: object = KeyClock.decode(raw) if store == TIME_STORE else raw
        found[(store, layout.user(key))] = value
    return found


def archive_of(log: History, path: Path, until: dict[int, int] | None = None) -> Path:
    """A Parquet archive of the input (ticks and markers too), in two files."""
    table = records_table(log.rows(until))
    path.mkdir(parents=True)
    half = table.num_rows // 2
    pq.write_table(table.slice(0, half), path / "part-0.parquet")
    pq.write_table(table.slice(half), path / "part-1.parquet")
    return path


def build(
    spark: SparkSession, log: History, archive: Path, ends: dict[int, int], out: Path
) -> Manifest:
    """Every processor's state from ``archive``, up to ``ends``."""
    ranges = {(TOPIC, p): OffsetRange(0, end) for p, end in ends.items()}
    request = BuildRequest(
        processors=2,
        covers={j: [p for p in ranges if bucket(p[1], B, 2) == j] for j in (0, 1)},
        ranges=ranges,
        retained=ranges,
        entries=log.entries,
        archive=archive,
    )
    return build_state(app, request, out, spark=spark)


@pytest.mark.spark
def test_a_scale_out_receiver_builds_the_time_state_of_the_keys_it_gains(
    spark: SparkSession, tmp_path: Path
) -> None:
    """``bootstrap: spark`` builds only the keys a processor gains (processor 2 of 3 takes
    keys of processor 0 of 2): each with its ticks, as the live run leaves it."""
    log = make_history(seed=37)
    live, _outputs = live_run(app, log, log.written)
    ranges = {(TOPIC, p): OffsetRange(0, end) for p, end in log.ends.items()}
    request = BuildRequest(
        processors=3,
        covers={2: [(TOPIC, 2)]},
        ranges=ranges,
        retained=ranges,
        entries=log.entries,
        archive=archive_of(log, tmp_path / "archive"),
        gained_from=(2, frozenset({0})),
    )
    manifest = build_state(app, request, tmp_path / "out", spark=spark)
    layout = KeyLayout(B)

    def gained(stored: bytes) -> bool:
        h = key_hash(layout.user(stored))
        return bucket(h, B, 3) == 2 and bucket(h, B, 2) == 0

    expected = [item for item in state_items(live, app) if gained(item[1])]
    assert {store for store, _, _ in expected} >= {TIME_STORE, DUE_STORE}
    [database] = ingested(manifest, tmp_path)
    built = state_items(database, app)
    database.close()
    assert readable(built) == readable(expected)


def ingested(manifest: Manifest, directory: Path) -> list[ProcessorDatabase]:
    """Each target's state, its files ingested as a processor ingests them."""
    databases = []
    for j in sorted(manifest.targets):
        identity = DatabaseIdentity(app.config.app_id, j, {"initial_processors": B})
        database = ProcessorDatabase.open(directory / f"db-{j}", identity, app.store_specs())
        looked = database.begin()  # a running processor's due index is loaded before
        assert looked.due_keys(NEVER, NEVER) == []
        looked.abort()
        database.bulk_load(manifest.files(j), manifest.targets[j].offsets)
        databases.append(database)
    return databases


@pytest.mark.spark
def test_a_build_gives_every_key_the_time_state_of_the_live_run(
    spark: SparkSession, tmp_path: Path
) -> None:
    log = make_history()
    live, _outputs = live_run(app, log, log.written)
    expected = state_items(live, app)
    assert {store for store, _, _ in expected} == {"last", "alerts", TIME_STORE, DUE_STORE}
    manifest = build(spark, log, archive_of(log, tmp_path / "archive"), log.ends, tmp_path / "out")
    built = []
    for database in ingested(manifest, tmp_path):
        built += state_items(database, app)
        database.close()
    assert readable(built) == readable(expected)
    closed = [c for (s, _), c in readable(expected).items() if s == TIME_STORE]
    assert any(isinstance(c, KeyClock) and c.floor > 0 for c in closed)  # ticks applied


@pytest.mark.spark
def test_a_processor_continuing_from_the_built_state_emits_what_the_live_one_does(
    spark: SparkSession, tmp_path: Path
) -> None:
    log = make_history(seed=36)
    written = len(log.written) * 2 // 3  # a cut live owners pass: past the growth
    before, after = log.written[:written], log.written[written:]
    cut = {p: 0 for p in log.ends}
    for partition, offset, *_ in before:
        cut[partition] = offset + 1
    assert all(cut[p] < log.ends[p] for p in cut)
    _head, head_outputs = live_run(app, log, before)
    _live, live_outputs = live_run(app, log, log.written)
    assert live_outputs[: len(head_outputs)] == head_outputs
    tail_outputs = live_outputs[len(head_outputs) :]

    manifest = build(spark, log, archive_of(log, tmp_path / "archive", cut), cut, tmp_path / "o")
    continued = []
    for database in ingested(manifest, tmp_path):
        j = database.identity.processor
        assert database.offsets() == {(TOPIC, p): cut[p] for p in cut if bucket(p, B, 2) == j}
        processor = new_processor(app, log)
        mine = [w for w in after if owner(w) == j]
        _db, outputs = live_run(app, log, mine, database=database, processor=processor)
        continued.append(outputs)
        database.close()
    finals = [o for o in tail_outputs if b"start" in (o.value or b"")]
    assert finals, "windows close after the cut"
    emitted = sorted(o.value or b"" for outputs in continued for o in outputs)
    assert emitted == sorted(o.value or b"" for o in tail_outputs)
    # each window's final once, over the run before the cut and the continued one
    once: dict[tuple[bytes | None, bytes], int] = defaultdict(int)
    for output in [*head_outputs, *(o for outputs in continued for o in outputs)]:
        if b"start" in (output.value or b""):
            once[(output.key, output.value or b"")] += 1
    assert set(once.values()) == {1}


def owner(written: tuple[object, ...]) -> int:
    """The processor (of 2) that owns a record's partition."""
    partition = written[0]
    assert isinstance(partition, int)
    return bucket(partition, B, 2)


@pytest.mark.spark
def test_an_archive_without_headers_is_refused_for_an_app_that_keeps_time(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Its ticks would be keyless records the build cannot know as ticks: the windows and
    timers the processors closed and fired by them would stay open."""
    log = make_history()
    table = records_table(log.rows()).drop_columns(["headers"])
    (tmp_path / "archive").mkdir()
    pq.write_table(table, tmp_path / "archive" / "part-0.parquet")
    with pytest.raises(ArchiveError, match="no 'headers' column") as refused:
        build(spark, log, tmp_path / "archive", log.ends, tmp_path / "out")
    assert "Fix: write the archive with the headers column" in str(refused.value)
    assert not (tmp_path / "out").exists()
