"""Review of the canonical Spark build (branch ``order-bulk``): reproductions of its faults.

Each test asserts what should hold; those of the faults fixed since pass (each failed before
its fix), an ``xfail(strict=True)`` one fails today and its reason names the fault. The Spark
tests build with the harness of ``test_spark_order`` (a local session).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from framework.bootstrap import BuildRequest, Manifest
from framework.bootstrap.build import build_state
from framework.bootstrap.errors import BootstrapError
from framework.bootstrap.history import HistoryError
from framework.bootstrap.manifest import TargetState
from framework.bootstrap.sources import ArchiveError
from framework.config_errors import ConfigError
from framework.coordination.registry import TopicEntry
from framework.input_times import ORDER_SCOPE
from framework.runtime.catchup_apply import SparkBuild
from framework.testing import TestDriver
from framework.time.ticks import tick_headers
from rebalance import TopicHistory
from rebalance.positions import OffsetRange, Position
from statestore import DatabaseIdentity, ProcessorDatabase
from tests.framework.order.appending_app import INPUTS, PARTITIONS, appending_app, config
from tests.framework.order.appending_world import Sent, applied, drawn, home, send
from tests.framework.order.test_spark_order import built_state, ingested
from tests.framework.test_spark_fold import Row, records_table

#: one item of a partition's log: (topic, partition, key, value, timestamp, headers)
Logged = tuple[str, int, bytes | None, bytes, int, list[dict[str, object]] | None]


def _as_logged(sent: list[Sent]) -> list[Logged]:
    return [
        (topic, home(topic, key)[1], key, json.dumps({"at": at}).encode(), at, None)
        for topic, key, at in sent
    ]


def _forced_tick(topic: str, partition: int, floor: int) -> Logged:
    """A tick as the live loop's bounded wait writes one (``ordering.forced_ticks``)."""
    ((name, value),) = tick_headers(floor, floor, "appending")
    return topic, partition, None, b"", floor, [{"key": name, "value": value}]


def _archive(log: list[Logged], path: Path, *, headers: bool) -> dict[Position, int]:
    """``log`` as a Parquet archive at ``path`` (without the optional ``headers`` column
    unless ``headers``); each partition's end."""
    ends = {(topic, p): 0 for topic in INPUTS for p in range(PARTITIONS)}
    rows: list[Row] = []
    for topic, partition, key, value, timestamp, header in log:
        rows.append((topic, partition, ends[(topic, partition)], key, value, timestamp, header))
        ends[(topic, partition)] += 1
    table = records_table(rows)
    if not headers:
        table = table.drop_columns(["headers"])
    path.mkdir(parents=True)
    pq.write_table(table, path / "part-0.parquet")
    return ends


@pytest.mark.spark
@pytest.mark.parametrize(
    "headers",
    [
        True,
        False,  # (refused: check_archive_ticks, since the review)
    ],
)
def test_a_forced_tick_in_an_archive_moves_the_built_marks_as_it_moved_the_live_ones(
    spark: SparkSession, tmp_path: Path, headers: bool
) -> None:
    """A canonical app that keeps no time still has ticks in its inputs: the bounded wait's
    forced ticks (``runtime.ordering``), read back into the marks. The live loop counts
    their floors; a build from an archive must too, or refuse the archive."""
    sent = drawn(seed=3, count=120)
    floor = max(at for *_, at in sent[:60]) + 500
    log = [*_as_logged(sent[:60]), _forced_tick("b", 0, floor), *_as_logged(sent[60:])]
    live = send(TestDriver(appending_app()), sent[:60])
    live.tick("b", 0, floor)
    send(live, sent[60:])
    without = send(TestDriver(appending_app()), sent)  # (the tick matters here)
    assert without.database.progress(ORDER_SCOPE) != live.database.progress(ORDER_SCOPE)

    ends = _archive(log, tmp_path / "archive", headers=headers)
    ranges = {position: OffsetRange(0, end) for position, end in ends.items()}
    request = BuildRequest(
        processors=1,
        covers={0: list(ranges)},
        ranges=ranges,
        retained=dict(ranges),
        entries={topic: TopicEntry(TopicHistory(topic, (PARTITIONS,))) for topic in INPUTS},
        archive=tmp_path / "archive",
    )
    try:
        manifest = build_state(appending_app(), request, tmp_path / "built", spark=spark)
    except ArchiveError:
        return  # refused: nothing wrong built
    database = ingested(manifest, tmp_path / "db")
    try:
        assert database.progress(ORDER_SCOPE) == live.database.progress(ORDER_SCOPE)
        assert database.offsets() == live.offsets()
        assert built_state(database) == applied(live)
    finally:
        database.close()


@pytest.mark.spark
def test_a_build_from_an_archive_does_not_stop_below_what_kafka_retains(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The archive holds the history up to where Kafka's retention starts (allowed: Kafka
    holds every record from where the archive ends). The records the cut holds must then be
    read again from Kafka, which no longer has them: the build must refuse, or not stop
    below what Kafka holds."""
    sent = drawn(seed=3, count=120)
    assert send(TestDriver(appending_app()), sent).pending  # (the cut holds records)
    ends = _archive(_as_logged(sent), tmp_path / "archive", headers=True)
    ranges = {position: OffsetRange(0, end) for position, end in ends.items()}
    retained = {position: OffsetRange(end, end) for position, end in ends.items()}
    request = BuildRequest(
        processors=1,
        covers={0: list(ranges)},
        ranges=ranges,
        retained=retained,
        entries={topic: TopicEntry(TopicHistory(topic, (PARTITIONS,))) for topic in INPUTS},
        archive=tmp_path / "archive",
    )
    try:
        manifest = build_state(appending_app(), request, tmp_path / "built", spark=spark)
    except (BootstrapError, HistoryError):
        return  # refused: nothing built that the processors cannot go on from
    offsets = manifest.targets[0].offsets
    assert {p: o for p, o in offsets.items() if o < retained[p].start} == {}


def test_a_canonical_app_that_keeps_time_with_bootstrap_spark_is_refused_at_check() -> None:
    app = appending_app()
    app.store("expiring", ttl=True)
    spark_config = config().model_copy(update={"bootstrap": "spark"})
    with pytest.raises(ConfigError, match="canonical"):
        app.configure(spark_config)
        app.check()


class _FinishedRun:
    """A Spark bootstrap run that has finished with ``manifest``."""

    def __init__(self, manifest: Manifest, directory: Path) -> None:
        self.manifest, self.directory = manifest, directory

    def poll(self) -> Manifest:
        return self.manifest

    def cancel(self) -> None:
        """Nothing runs."""


def test_a_scales_spark_build_stores_the_marks_it_built(tmp_path: Path) -> None:
    marks = {("a", 0): 1500, ("a", 1): 1400, ("b", 0): 1300, ("b", 1): 1600}
    target = TargetState(files={}, keys=0, offsets=dict.fromkeys(marks, 10), marks=marks)
    manifest = Manifest(targets={1: target}, directory=tmp_path / "output")
    app = appending_app()
    database = ProcessorDatabase.open(
        tmp_path / "db", DatabaseIdentity(app.config.app_id, 1), app.store_specs()
    )
    try:
        scope = "catchup-1"
        build = SparkBuild(_FinishedRun(manifest, tmp_path / "run"), database, 1, scope, "flag")  # type: ignore[arg-type]
        assert build.poll() == 0
        stored = [database.progress(name) for name in (ORDER_SCOPE, f"{scope}-mark")]
        assert marks in stored
    finally:
        database.close()
