"""Running the Spark bulk build for an app: sources, checks, plan, and the app's own fold.

Shared by ``splitstate backfill`` (every processor, from the topic's beginning) and by joining
processors with ``bootstrap: spark`` (the keys they gain in a scale). For an app that keeps
time the history's ticks are read first (``tick_table.collect_ticks``) and given to the fold.
For an app that orders its inputs canonically, each record's mark is computed first
(``order_marks``), the build stops where the live loop would have (``order_cut``), the fold
applies each key's records in their canonical order, and the manifest holds each partition's
mark at its built offset (stored with the state); such an app that keeps time, or whose
inputs shrank, is refused (``check_orderable``: its ticks are not applied in the canonical
order, nor a shrink survivor's marks raised, yet).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from framework.app import App
from framework.bootstrap.errors import BootstrapError
from framework.bootstrap.fold import AppFold
from framework.bootstrap.history import (
    HistoryError,
    archive_ranges,
    check_kafka_ranges,
    lineage_ranks,
)
from framework.bootstrap.job import BootstrapPlan, run_bootstrap, spark_errors
from framework.bootstrap.manifest import Manifest
from framework.bootstrap.order_cut import cut_build
from framework.bootstrap.order_marks import child_starts, marks_and_bases
from framework.bootstrap.progress import BootstrapProgress
from framework.bootstrap.sources import (
    check_archive_ticks,
    kafka_history,
    parquet_history,
    parquet_offsets,
)
from framework.bootstrap.spark_session import spark_session
from framework.bootstrap.tick_table import collect_ticks
from framework.coordination.registry import TopicEntry
from framework.input_times import ordered
from framework.jvm import find_java, spark_kafka_jars
from rebalance import Shrink
from rebalance.positions import OffsetRange, Position

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["BuildRequest", "bootstrap_session", "build_state", "check_orderable"]


@dataclass(frozen=True)
class BuildRequest:
    """What to build: which processors (and the partitions whose offsets each covers), at
    which processor count, from which ranges of history.

    ``ranges`` start where a key's history starts (offset 0). With an ``archive`` the build
    reads it instead of Kafka, up to where the archive ends (all of ``ranges`` when
    ``exact``); ``retained`` is what Kafka holds now, which the processors continue from.
    ``gained_from`` = (old processor count, sources): build only the keys whose owner at the
    old count is one of the sources (a scale's receiver), not every key the targets own.
    """

    processors: int
    covers: Mapping[int, Iterable[Position]]
    ranges: Mapping[Position, OffsetRange]
    retained: Mapping[Position, OffsetRange]
    entries: Mapping[str, TopicEntry]
    archive: Path | None = None
    exact: bool = True
    gained_from: tuple[int, frozenset[int]] | None = None


def bootstrap_session(app: App, *, kafka: bool = True) -> SparkSession:
    """A Spark session for ``app``'s builds: its ``spark.master`` and ``spark.settings``, with
    Spark's Kafka connector unless ``kafka`` is false (builds from an archive only).

    Pass it to ``build_state`` to run several builds in it: they share its start, its JVM's
    compiled code and its Python workers. The caller stops it (``stop()``).
    """
    config = app.config
    java = find_java()
    return spark_session(
        f"splitstate-bootstrap-{config.app_id}",
        config.spark.master,
        config.spark.settings,
        jars=spark_kafka_jars() if kafka else [],
        java_home=java.executable.resolve().parent.parent,
    )


def build_state(
    app: App,
    request: BuildRequest,
    destination: Path,
    on_progress: Callable[[BootstrapProgress], None] | None = None,
    *,
    spark: SparkSession | None = None,
) -> Manifest:
    """Run the Spark job for ``request``; returns the manifest published at ``destination``.

    ``spark``: a session to run in (``bootstrap_session``), left running; by default the
    build starts its own and stops it at the end.
    """
    from pyspark import StorageLevel  # noqa: PLC0415

    config = app.config
    check_orderable(app, request.entries)
    if request.archive is None:
        check_kafka_ranges(request.ranges, request.retained, "Kafka")
    session = spark or bootstrap_session(app, kafka=request.archive is None)
    marked: DataFrame | None = None
    canonical = ordered(app)
    try:
        with spark_errors():
            topics = [t.topic for t in config.inputs]
            if request.archive is None:
                served = dict(request.ranges)
                history = kafka_history(session, config.spark_kafka_options(), served)
            else:
                archived = parquet_offsets(parquet_history(session, request.archive, topics))
                if app.uses_time or canonical:  # (a canonical app's forced ticks are ticks)
                    check_archive_ticks(session, request.archive)
                served = archive_ranges(request.ranges, archived, exact=request.exact)
                _check_continuation(served, request.retained)
                history = parquet_history(session, request.archive, topics, served)
            covered = {j: {p: served[p].end for p in ps} for j, ps in request.covers.items()}
            marks: dict[int, dict[Position, int]] | None = None
            bases: dict[int, dict[Position, tuple[int, int]]] | None = None
            if canonical:  # (read several times: where to stop, then the job)
                marked, found = marks_and_bases(history, app, request.entries)
                marked = marked.persist(StorageLevel.MEMORY_AND_DISK)
                counts = {name: entry.history.partitions for name, entry in request.entries.items()}
                starts = child_starts(request.entries)
                cut = cut_build(marked, covered, topics, counts, bases=found, starts=starts)
                covered, marks, history, bases = cut.covered, cut.marks, cut.history, cut.bases
                if request.archive is not None:
                    _check_cut_retained(covered, request.retained)
            plan = BootstrapPlan(
                initial_processors=config.initial_processors,
                processors=request.processors,
                targets=frozenset(request.covers),
                lineage=lineage_ranks(config, request.entries),
                covered=covered,
                shards=config.spark.shards,
                gained_from=request.gained_from,
                crash_limit=config.crash_limit,
                stop_on_crash=config.on_error == "stop",
                inputs=tuple(topics) if canonical else None,
                marks=marks,
                bases=bases,
            )
            initial = {name: entry.initial_partitions for name, entry in request.entries.items()}
            histories = {name: entry.history for name, entry in request.entries.items()}
            ticks = collect_ticks(history, config.app_id) if app.uses_time else None
            fold = AppFold(app, initial, histories, config.initial_processors, ticks)
            return run_bootstrap(session, history, plan, fold, destination, on_progress=on_progress)
    finally:
        if marked is not None:
            marked.unpersist()
        if spark is None:
            session.stop()


def check_orderable(app: App, entries: Mapping[str, TopicEntry] | None = None) -> None:
    """Refuse to build an app that orders its inputs canonically and keeps time: the fold
    applies a key's ticks in lineage order among its records, not in their canonical order,
    so its windows and timers could differ from the live loop's (not covered yet); or whose
    inputs (``entries``) shrank: its marks would not give a survivor its deleted partitions'
    final marks from its hold on, as the live loop does (``framework.order.survivor_links``)."""
    if not ordered(app):
        return
    shrunk = sorted(
        name
        for name, entry in (entries or {}).items()
        if any(isinstance(step, Shrink) for step in entry.history.steps)
    )
    if shrunk:
        raise BootstrapError(
            f"app {app.config.app_id!r} orders its inputs canonically (time.input_order: "
            f"canonical) and its input(s) {shrunk} shrank: a Spark build does not yet give a "
            "shrink's survivor its deleted partitions' final marks, so it would build state "
            "the live loop does not. Nothing was built. Fix: bootstrap: replay or snapshot "
            "for a scale; for a backfill, let the processors replay the history instead."
        )
    if app.uses_time:
        raise BootstrapError(
            f"app {app.config.app_id!r} orders its inputs canonically (time.input_order: "
            "canonical) and keeps time (windows, timers, a ttl or an interval join): a Spark "
            "build does not yet apply its ticks in the canonical order, so it would build "
            "state the live loop does not. Nothing was built. Fix: bootstrap: replay or "
            "snapshot for a scale; for a backfill, let the processors replay the history "
            "instead."
        )


def _check_cut_retained(
    covered: Mapping[int, Mapping[Position, int]], retained: Mapping[Position, OffsetRange]
) -> None:
    """A canonical build from an archive stops where the live loop would: the records it
    holds back are read again by the processors, from Kafka, which must still have them."""
    problems = [
        f"{position[0]}[{position[1]}] at {offset} (Kafka starts at {retained[position].start})"
        for offsets in covered.values()
        for position, offset in sorted(offsets.items())
        if offset < retained[position].start
    ]
    if problems:
        raise HistoryError(
            "the canonical order stops this build before records that only the archive holds: "
            f"{'; '.join(problems)}. The processors would have to read them again from Kafka, "
            "whose retention deleted them. Nothing was built. Fix: archive less (up to records "
            "Kafka still holds, past those the order holds back), or keep Kafka's records longer"
        )


def _check_continuation(
    served: Mapping[Position, OffsetRange], retained: Mapping[Position, OffsetRange]
) -> None:
    """After an archive, Kafka must hold every record from where the archive ends."""

    problems = []
    for position, offsets in sorted(served.items()):
        have = retained[position]
        name = f"{position[0]}[{position[1]}]"
        if offsets.end < have.start:
            problems.append(
                f"{name}: the archive ends at {offsets.end} but Kafka starts at {have.start}"
            )
        elif offsets.end > have.end:
            problems.append(
                f"{name}: the archive reaches offset {offsets.end}, past the topic's end "
                f"{have.end} (an archive of another topic?)"
            )
    if problems:
        raise HistoryError(
            f"the archive and the topic do not join up: {'; '.join(problems)}. Processors "
            "continue in Kafka where the archive ends, so no record may be missing in between. "
            "Fix: archive up to records Kafka still holds, or check the archive's topic."
        )
