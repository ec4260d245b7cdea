"""The Spark job (group, fold on Arrow, SST files) builds what replaying the records builds.

No broker: the history is a DataFrame (or a Parquet archive) of two topics, one of which grew
2 -> 4 partitions mid-history, with what the fold must get right: headers (several, null
values, none at all), null values, missing timestamps, records without a key, a growth
marker, misplaced and late records (skipped), a failing record (rolled back) and records
without a count header (placed by either count: applied; placed by neither, or late:
skipped, as the runtime dead-letters them). The replay is ``RecordProcessor`` over
``StoredMessage`` records in lineage-then-offset order, restore mode, as the catch-up applies
them; the fold's output must be the same bytes.
"""

from __future__ import annotations

import os
import random
import stat
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812

from framework.bootstrap import AppFold, BootstrapPlan, BuildRequest, Manifest, run_bootstrap
from framework.bootstrap.build import build_state
from framework.bootstrap.fold import header_lists
from framework.bootstrap.history import lineage_ranks
from framework.bootstrap.job import group_labels
from framework.bootstrap.spark_session import SparkSetupError, spark_session
from framework.coordination.registry import TopicEntry
from framework.processing import RecordProcessor, StoredMessage
from rebalance import TopicHistory, bucket, key_hash
from rebalance.positions import OffsetRange, Position
from statestore import DatabaseIdentity, ProcessorDatabase
from statestore.key_layout import KeyLayout
from tests.framework.journal_app import app
from tests.framework.test_spark_fold import SCHEMA, Row, records_table

B = 2  # the journal app's initial processors
Records = list[Row]


def placed(key: bytes, count: int) -> int:
    return bucket(key_hash(key), 2, count)


def count(value: int) -> list[dict[str, Any]]:
    return [{"key": "splitstate.count", "value": str(value).encode()}]


class _Writer:
    """Appends records to a history (``rows``), counting offsets per partition."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.offsets: dict[Position, int] = defaultdict(int)
        self.rows: Records = []
        self.unheaded = History()

    def add(self, topic: str, partition: int, key: bytes | None, headers: Any) -> bytes | None:
        """Append a record (a random value, maybe no timestamp); returns its value."""
        rng = self.rng
        value = rng.choice([b"a", b"bb", b"\x00\xff", None, b"boom", b"c" * 40])
        stamp = None if rng.random() < 0.1 else 1_700_000_000_000 + rng.randrange(10**6)
        offset = self.offsets[(topic, partition)]
        self.rows.append((topic, partition, offset, key, value, stamp, headers))
        self.offsets[(topic, partition)] += 1
        return value

    def add_unheaded(self, partition: int, key: bytes, *, placed: bool) -> None:
        """Append a record of ``events`` without a count header, noting whether the fold
        applies it (``placed``; unless the function fails on it) or skips it."""
        where = ("events", partition, self.offsets[("events", partition)])
        value = self.add("events", partition, key, None)
        if not placed:
            self.unheaded.skipped.add(where)
        elif value != b"boom":
            self.unheaded.applied.add(where)


def make_history(seed: int = 5) -> tuple[Records, dict[str, TopicHistory], History]:
    """The records of both topics (in no particular order), the topics' histories, and where
    the records without a count header are (applied, or skipped)."""
    writer = _Writer(seed)
    rng, add, keys = writer.rng, writer.add, [f"k{i:02d}".encode() for i in range(30)]
    for _ in range(400):  # events on 2 partitions
        key, roll = rng.choice(keys), rng.random()
        if roll < 0.05:
            writer.add_unheaded(placed(key, 2), key, placed=True)  # no count header
        elif roll < 0.08:
            writer.add_unheaded(1 - placed(key, 2), key, placed=False)  # and misplaced
        elif roll < 0.13:
            add("events", 1 - placed(key, 2), key, count(2))  # misplaced: skipped
        elif roll < 0.18:
            add("events", placed(key, 2), key, [{"key": "trace", "value": None}, *count(2)])
        else:
            add("events", placed(key, 2), key, count(2))
    thresholds = {}
    for child in (2, 3):  # the growth to 4: a marker in each parent
        thresholds[child] = writer.offsets[("events", child - 2)]
        marker = [{"key": "splitstate.marker", "value": f"events/4/{child}".encode()}]
        add("events", child - 2, None, marker)
    for _ in range(400):  # events on 4 partitions
        _events_after_the_growth(writer, rng.choice(keys), rng.random())
    for _ in range(200):
        key = rng.choice(keys)
        add("notes", placed(key, 2), key, count(2))
    add("notes", 0, None, None)  # no key: never reaches the function
    histories = {
        "events": TopicHistory.of("events", [2, 4], thresholds),
        "notes": TopicHistory.of("notes", [2]),
    }
    return writer.rows, histories, writer.unheaded


def _events_after_the_growth(writer: _Writer, key: bytes, roll: float) -> None:
    """One record of ``events`` after its growth to 4 partitions."""
    moved = placed(key, 4) >= 2
    if roll < 0.05 and moved:
        writer.add("events", placed(key, 2), key, count(2))  # late: after its growth's marker
    elif roll < 0.08 and moved:
        writer.add_unheaded(placed(key, 2), key, placed=False)  # late, and no header
    elif roll < 0.11:
        writer.add_unheaded(placed(key, 4), key, placed=True)  # no header, placed by 4
    elif roll < 0.13 and moved:
        writer.add_unheaded(5 - placed(key, 4), key, placed=False)  # the other child
    else:
        writer.add("events", placed(key, 4), key, [*count(4), {"key": "x", "value": b""}])


@dataclass
class History:
    """Where the records without a count header are: ``(topic, partition, offset)`` of those
    the fold applies, and of those it must skip (misplaced or late)."""

    applied: set[tuple[str, int, int]] = field(default_factory=set)
    skipped: set[tuple[str, int, int]] = field(default_factory=set)

    def check(self, items: list[tuple[str, bytes, bytes]]) -> None:
        """``items`` (journals) hold every applied one and no skipped one."""
        journaled = {
            (topic, partition, offset)
            for _store, _key, raw in items
            for topic, partition, offset, *_rest in orjson.loads(raw)
        }
        assert self.skipped and not self.skipped & journaled
        assert self.applied and self.applied <= journaled


def lineage_order(rows: Records, histories: dict[str, TopicHistory]) -> Records:
    """``rows`` in lineage order: topics in config order, then each record's
    ``TopicHistory.rank``, then offset."""
    topics = [t.topic for t in app.config.inputs]
    return sorted(rows, key=lambda r: (topics.index(r[0]), histories[r[0]].rank(r[1], r[2]), r[2]))


def replay(rows: Records, histories: dict[str, TopicHistory]) -> list[tuple[str, bytes, bytes]]:
    """``(store, stored key, value bytes)`` after applying ``rows`` in lineage-offset order."""
    processor = RecordProcessor(app, {"events": 2, "notes": 2}, histories=histories)
    database = ProcessorDatabase.in_memory(
        DatabaseIdentity("journal", -1, {"initial_processors": B}), app.store_specs()
    )
    for topic, partition, offset, key, value, stamp, headers in lineage_order(rows, histories):
        pairs = [(h["key"], h["value"]) for h in headers] if headers else None
        batch = database.begin()
        message = StoredMessage(topic, partition, offset, key, value, stamp, pairs)
        processor.process(batch, message, restore=True)
        batch.commit()
    return [("journal", key, raw) for key, raw in database.backend.scan("journal")]


def dead_letters(rows: Records, histories: dict[str, TopicHistory]) -> int:
    """How many of ``rows`` the runtime dead-letters (each record on its own merits)."""
    processor = RecordProcessor(app, {"events": 2, "notes": 2}, histories=histories)
    database = ProcessorDatabase.in_memory(
        DatabaseIdentity("journal", -1, {"initial_processors": B}), app.store_specs()
    )
    for topic, partition, offset, key, value, stamp, headers in rows:
        pairs = [(h["key"], h["value"]) for h in headers] if headers else None
        batch = database.begin()
        message = StoredMessage(topic, partition, offset, key, value, stamp, pairs)
        processor.process(batch, message, restore=True)
        batch.commit()
    return processor.dead_letter_count


def entries(histories: dict[str, TopicHistory]) -> dict[str, TopicEntry]:
    return {name: TopicEntry(history) for name, history in histories.items()}


def owner(stored: bytes, processors: int) -> int:
    return bucket(key_hash(KeyLayout(B).user(stored)), B, processors)


def built_items(manifest: Manifest, target: int, directory: Path) -> list[tuple[str, bytes, bytes]]:
    """What ingesting a target's files gives, as stored bytes."""
    identity = DatabaseIdentity("journal", target, {"initial_processors": B})
    with ProcessorDatabase.open(directory / f"db-{target}", identity, app.store_specs()) as db:
        db.bulk_load(manifest.files(target), manifest.targets[target].offsets)
        return [("journal", key, raw) for key, raw in db.backend.scan("journal")]


def test_the_arrow_fold_gives_the_replays_bytes() -> None:
    rows, histories, unheaded = make_history()
    ordered = lineage_order(rows, histories)
    folded = list(AppFold(app, {"events": 2, "notes": 2}, histories, B)(records_table(ordered)))
    expected = replay(rows, histories)
    assert folded == expected
    assert len(expected) == 30  # every key has a journal
    unheaded.check(folded)


@pytest.mark.spark
@pytest.mark.parametrize(
    ("processors", "targets", "gained_from"),
    [(4, {0, 1, 2, 3}, None), (3, {2}, (2, frozenset({0}))), (2, {0}, (3, frozenset({2})))],
    ids=["every-processor", "a-scale-out-receiver", "a-scale-in-receiver"],
)
def test_the_spark_job_builds_what_the_replay_builds(
    spark: SparkSession,
    tmp_path: Path,
    processors: int,
    targets: set[int],
    gained_from: tuple[int, frozenset[int]] | None,
) -> None:
    rows, histories, unheaded = make_history()
    random.Random(1).shuffle(rows)
    frame = spark.createDataFrame(rows, _ddl()).repartition(3)
    plan = BootstrapPlan(
        initial_processors=B,
        processors=processors,
        targets=frozenset(targets),
        lineage=lineage_ranks(app.config, entries(histories)),
        covered={j: {("events", j): 1} for j in targets},
        shards=app.config.spark.shards,
        gained_from=gained_from,
    )
    fold = AppFold(app, {"events": 2, "notes": 2}, histories, B)
    manifest = run_bootstrap(spark, frame, plan, fold, tmp_path / "out")

    expected = replay(rows, histories)
    previous, sources = gained_from or (processors, frozenset(targets))
    wanted = [
        item
        for item in expected
        if owner(item[1], processors) in targets and owner(item[1], previous) in sources
    ]
    built = {j: built_items(manifest, j, tmp_path / "dbs") for j in sorted(targets)}
    assert sorted(item for items in built.values() for item in items) == sorted(wanted)
    if gained_from is None:  # every key built
        unheaded.check([item for items in built.values() for item in items])
    assert wanted, "the plan builds some keys"
    for j, items in built.items():
        assert all(owner(key, processors) == j for _, key, _ in items)
        assert manifest.targets[j].offsets == {("events", j): 1}
    assert manifest.records_read == len(rows)
    applied = [
        r
        for r in rows
        if r[3] is not None
        and bucket(key_hash(r[3]), B, processors) in targets
        and bucket(key_hash(r[3]), B, previous) in sources
    ]
    # the records the runtime would dead-letter (misplaced, late, failing) are not applied:
    # read = applied + dead letters + records of no target (found by a new user: backfill's
    # "records read / applied" counted dead letters as applied)
    dead = dead_letters(applied, histories)
    assert dead > 0, "the history has records that become dead letters"
    assert manifest.records_dead_lettered == dead
    assert manifest.records_applied == len(applied) - dead


@pytest.mark.spark
def test_many_items_are_range_partitioned_into_files_that_ingest_as_one(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Past ``one_writer_items`` the items are range-partitioned over several writer tasks;
    each writes runs of at most ``max_file_items`` keys, and the files ingest to the state
    a single writer's files give."""
    rows, histories, _unheaded = make_history()
    frame = spark.createDataFrame(rows, _ddl())
    fold = AppFold(app, {"events": 2, "notes": 2}, histories, B)
    plan = BootstrapPlan(
        initial_processors=B,
        processors=2,
        targets=frozenset({0, 1}),
        lineage=lineage_ranks(app.config, entries(histories)),
        covered={0: {}, 1: {}},
        shards=2,
        max_file_items=4,
        one_writer_items=0,
    )
    manifest = run_bootstrap(spark, frame, plan, fold, tmp_path / "out")
    expected = replay(rows, histories)
    writers = {path.name.split("-")[1] for j in (0, 1) for path in manifest.files(j)["journal"]}
    assert len(writers) >= 2  # part-<writer task>-<run>.sst
    for j in (0, 1):
        files = manifest.files(j)["journal"]
        assert len(files) >= 3
        built = built_items(manifest, j, tmp_path)
        assert built == [item for item in expected if owner(item[1], 2) == j]


@pytest.mark.spark
def test_two_builds_in_one_session_each_build_their_keys(
    spark: SparkSession, tmp_path: Path
) -> None:
    """``build_state`` runs in a given session, leaves it running, and a second build in it
    (other processors, from a Parquet archive) is as right as the first."""
    rows, histories, _unheaded = make_history(seed=9)
    archive = tmp_path / "archive"
    archive.mkdir()
    table = records_table(rows)
    pq.write_table(table.slice(0, 500), archive / "part-0.parquet")
    pq.write_table(table.slice(500), archive / "part-1.parquet")
    ends: dict[Position, int] = defaultdict(int)
    for topic, partition, offset, *_ in rows:
        ends[(topic, partition)] = max(ends[(topic, partition)], offset + 1)
    ranges = {position: OffsetRange(0, end) for position, end in ends.items()}
    expected = replay(rows, histories)
    for processors, targets in [(2, [0, 1]), (4, [2, 3])]:
        request = BuildRequest(
            processors=processors,
            covers={j: [p for p in ranges if bucket(p[1], B, processors) == j] for j in targets},
            ranges=ranges,
            retained=ranges,
            entries=entries(histories),
            archive=archive,
        )
        manifest = build_state(app, request, tmp_path / f"out-{processors}", spark=spark)
        for j in targets:
            built = built_items(manifest, j, tmp_path / f"dbs-{processors}")
            assert built == [item for item in expected if owner(item[1], processors) == j]
            assert built
    assert spark.range(3).count() == 3  # still running


@pytest.mark.spark
def test_groups_are_spread_evenly_over_the_fold_tasks(spark: SparkSession) -> None:
    for groups, tasks in [(32, 4), (32, 2), (6, 4), (96, 8), (3, 3)]:
        labels = group_labels(groups, tasks)
        assert len(set(labels)) == groups
        frame = spark.createDataFrame([(label,) for label in labels], "label int")
        placed_in = {
            row["label"]: row["task"]
            for row in frame.repartition(tasks, "label")
            .select("label", F.spark_partition_id().alias("task"))
            .collect()
        }
        assert [placed_in[label] for label in labels] == [g % tasks for g in range(groups)]


def test_headers_of_slices_and_chunks_are_decoded_row_by_row() -> None:
    rng = random.Random(3)
    rows: list[Any] = []
    for i in range(300):
        if rng.random() < 0.1:
            rows.append(None)
            continue
        rows.append(
            [
                {"key": f"h{i}-{j}", "value": None if rng.random() < 0.2 else bytes([i % 256, j])}
                for j in range(rng.randrange(4))
            ]
        )
    column = pa.array(rows, SCHEMA.field("headers").type)

    def expected(part: list[Any]) -> list[Any]:
        return [[(h["key"], h["value"]) for h in r] if r else None for r in part]

    for _ in range(200):
        start = rng.randrange(300)
        length = rng.randrange(300 - start + 1)
        assert header_lists(column.slice(start, length)) == expected(rows[start : start + length])
    chunked = pa.chunked_array([column.slice(0, 100), column.slice(100, 7), column.slice(107)])
    assert header_lists(chunked) == expected(rows)


def _ddl() -> str:
    return (
        "topic string, partition int, offset long, key binary, value binary, timestamp long, "
        "headers array<struct<key:string,value:binary>>"
    )


@pytest.mark.spark
def test_the_built_files_are_staged_owner_only(spark: SparkSession, tmp_path: Path) -> None:
    """The job's SST files hold state: their directory is owner-only (0700) from the start,
    whatever the umask of the process that runs the job."""
    rows, histories, _unheaded = make_history()
    plan = BootstrapPlan(
        initial_processors=B,
        processors=2,
        targets=frozenset({0}),
        lineage=lineage_ranks(app.config, entries(histories)),
        covered={0: {}},
        shards=2,
    )
    fold = AppFold(app, {"events": 2, "notes": 2}, histories, B)
    previous = os.umask(0o022)
    try:
        manifest = run_bootstrap(
            spark, spark.createDataFrame(rows, _ddl()), plan, fold, tmp_path / "out"
        )
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o700
    assert manifest.files(0)["journal"]


def test_a_session_already_running_without_the_kafka_connector_is_refused_by_name(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Spark cannot add jars to a running JVM: a session another part of the process started
    without the Kafka connector would read no Kafka ("Failed to find data source: kafka")."""
    jar = tmp_path / "spark-sql-kafka.jar"
    jar.write_bytes(b"")
    with pytest.raises(SparkSetupError, match="already runs in this process without") as refused:
        spark_session("splitstate-test", jars=[jar])
    assert "in a process of its own" in str(refused.value)
    assert spark_session("splitstate-test") is spark  # without jars asked: the running one
