"""The Spark job that builds processors' state from history and writes it as SST files.

Steps, all distributed:

1. *group*: give each record a group from its key (Spark's own ``hash``, so no Python runs
   before the shuffle; a key is always in one group, so no key's history reaches the driver)
   and hand each group to Python as one Arrow table (``applyInArrow``);
2. *fold*: per group (``tasks.group_folder``), keep the records whose key belongs to a target
   processor (``bucket(key_hash, B, P')``, the runtime's murmur3), order them by lineage
   rank (the step of the topic's history in force at the record's offset) then offset and
   fold them with the given ``Fold`` -- the app's own processor
   function in restore mode -- into final ``(processor, store, key, value)`` items (under a
   ``crash_watch.CrashWatch``: when a Python worker dies in a group, the job runs again and
   that group folds carefully, skipping a record that killed it ``crash_limit`` times, as the
   processors do);
3. *write*: range-partition the items by ``(processor, store, key)`` (a few are all given to
   one task instead), sort, and let each task stream its runs into SST files
   (``mapInArrow``; non-overlapping per store, so RocksDB ingests them below L0).

Files are written into a hidden ``.partial`` directory; the manifest (files, key counts and
the offsets covered per processor) is written last and the directory renamed into place, so a
half-written bootstrap is never found, let alone ingested.
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
import struct
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import mmh3

from framework.bootstrap.careful_child import Watch
from framework.bootstrap.crash_watch import CrashWatch
from framework.bootstrap.errors import BootstrapError
from framework.bootstrap.manifest import Manifest, TargetState
from framework.bootstrap.order_marks import MARK_COLUMN
from framework.bootstrap.progress import BootstrapProgress, SparkProgress
from framework.bootstrap.tasks import Placement, file_writer, group_folder
from rebalance.positions import Position
from statestore.owner_only import private_directory

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

    from framework.bootstrap.history import RankSteps

__all__ = ["BootstrapPlan", "Fold", "run_bootstrap", "spark_errors"]

_ITEMS_SCHEMA = "processor int, store string, key binary, value binary"
_FILES_SCHEMA = "processor int, store string, path string, keys long"
#: where a build's crash watch keeps its markers (in its staging directory)
_CRASH_WATCH = "crash-watch"


class Fold(Protocol):
    """Folds one processor's records of a group (already in processing order) into final
    state items."""

    def __call__(
        self, records: pa.Table, running: Watch | None = None
    ) -> Iterable[tuple[str, bytes, bytes]]:
        """``(store, stored key, encoded value)`` of every key the records leave state for
        (the stored key, prefix and all, is what the SST files hold and are sorted by).
        ``records`` has the columns of ``fold.RECORD_COLUMNS``: topic (string), partition,
        offset, key and value (binary), timestamp (epoch ms) and headers
        (``list<struct<key: string, value: binary>>``). ``running``, when given, is told
        the index of the record the function runs on before it runs, and -1 after, and each
        tick's item it fires (the crash guard's record of what a death interrupted); the
        ticks' items it refuses are dropped as failed."""
        ...

    @property
    def dead_letters(self) -> int:
        """Records this fold dead-lettered so far, over all calls (not applied, as the runtime
        would not apply them)."""
        ...


@dataclass(frozen=True)
class BootstrapPlan:
    """Which processors to build, and how records are placed and ordered.

    ``lineage`` gives each input partition (every one ever created) its ranks by offset
    (``history.lineage_ranks``): records of a key are applied by ascending ``(rank,
    offset)``, their produced order (topics in config order, then the step of the topic's
    history in force at each record: through growths, shrinks and partitions grown again).
    ``covered`` is, per target, the offsets the built state covers. ``gained_from`` = (old
    processor count, sources) keeps only keys whose owner at the old count is one of the
    sources (a scale's receiver builds the keys it gains, never keys it already owns). SST
    files hold at most ``max_file_items`` keys; up to ``one_writer_items`` items one task
    writes them all, more are range-partitioned over the cores first. A record that kills the
    fold's process ``crash_limit`` times alone is skipped (``stop_on_crash``: the build fails
    naming it), as the processors skip it (``crash_watch``). ``inputs``: the input topics in
    config order for an app that orders them canonically (the history then has a ``mark``
    column: ``order_marks.with_marks``; each key's records are folded in their canonical
    order), with ``marks``, per target, each partition's mark at its covered offset (stored
    with the offsets: ``TargetState.marks``; a partition without one stores none) and
    ``bases``, per target, its growth children's bases (``TargetState.bases``).
    """

    initial_processors: int
    processors: int
    targets: frozenset[int]
    lineage: Mapping[Position, RankSteps]
    covered: Mapping[int, Mapping[Position, int]]
    shards: int = 32
    max_file_items: int = 2_000_000
    one_writer_items: int = 200_000
    gained_from: tuple[int, frozenset[int]] | None = None
    crash_limit: int = 3
    stop_on_crash: bool = False
    inputs: tuple[str, ...] | None = None
    marks: Mapping[int, Mapping[Position, int]] | None = None
    bases: Mapping[int, Mapping[Position, tuple[int, int]]] | None = None


def run_bootstrap(
    spark: SparkSession,
    history: DataFrame,
    plan: BootstrapPlan,
    fold: Fold,
    destination: Path,
    *,
    on_progress: Callable[[BootstrapProgress], None] | None = None,
) -> Manifest:
    """Build ``plan.targets``' state from ``history`` into ``destination`` (atomically)."""
    from pyspark import StorageLevel  # noqa: PLC0415

    destination = destination.expanduser().resolve()
    partial = destination.with_name(f".{destination.name}.partial-{uuid.uuid4().hex[:8]}")
    private_directory(partial, exist_ok=False)  # the files hold state: owner-only
    progress = BootstrapProgress()
    reporter = SparkProgress(spark, progress, on_progress)
    reporter.start()
    watch = CrashWatch(partial / _CRASH_WATCH, plan.crash_limit, plan.stop_on_crash)
    try:
        placement = _placement(plan)
        groups = max(1, plan.shards * len(plan.targets))
        tasks = min(groups, 2 * max(1, spark.sparkContext.defaultParallelism))
        records = history.select(*_record_columns(placement, group_labels(groups, tasks)))
        while True:  # again only when a worker died in a group (then folded carefully)
            counters = tuple(spark.sparkContext.accumulator(0) for _ in range(3))
            reporter.count_with(counters)
            folder = group_folder(placement, fold, counters, watch)
            items = (
                records.repartition(tasks, "group")
                .groupBy("group")
                .applyInArrow(folder, _ITEMS_SCHEMA)
                .persist(StorageLevel.MEMORY_AND_DISK)
            )
            try:
                written = _fold_and_write(spark, plan, items, partial, progress)
                break
            except Exception as error:
                if not _is_spark_failure(error) or not watch.again(error):
                    raise
                for files in partial.glob("processor-*"):  # the failed run's, written again
                    shutil.rmtree(files, ignore_errors=True)
            finally:
                items.unpersist()
        progress.phase = "publish"
        skipped = watch.skipped()
        shutil.rmtree(partial / _CRASH_WATCH, ignore_errors=True)
        read, applied, dead = (counter.value for counter in counters)
        manifest = _manifest(plan, written, partial, (read, applied, dead))
        manifest.skipped = skipped
        manifest.write(partial)
        if destination.exists():
            shutil.rmtree(destination)
        partial.rename(destination)
        progress.phase = "done"
        reporter.count()
        return Manifest.read(destination)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    finally:
        reporter.stop()


def _fold_and_write(
    spark: SparkSession,
    plan: BootstrapPlan,
    items: DataFrame,
    partial: Path,
    progress: BootstrapProgress,
) -> list[Any]:
    """Fold (count the items), then write them as SST files; the files' rows."""
    progress.phase = "fold"
    total = items.count()
    progress.phase = "write"
    if total <= plan.one_writer_items:  # one task writes all: no sampling job, no shuffle
        ranged = items.coalesce(1)
    else:
        parallelism = max(1, spark.sparkContext.defaultParallelism)
        files = max(parallelism, -(-total // plan.max_file_items))
        ranged = items.repartitionByRange(files, "processor", "store", "key")
    return (
        ranged.sortWithinPartitions("processor", "store", "key")
        .mapInArrow(file_writer(partial, plan.max_file_items), _FILES_SCHEMA)
        .collect()
    )


@contextlib.contextmanager
def spark_errors() -> Iterator[None]:
    """Turn Spark's long JVM-wrapped failures into a ``BootstrapError`` naming the cause."""
    try:
        yield
    except Exception as error:
        if _is_spark_failure(error):
            raise BootstrapError(
                f"the Spark bootstrap failed: {_cause(error)}. Nothing was ingested."
            ) from error
        raise


def _is_spark_failure(error: BaseException) -> bool:
    return type(error).__module__.startswith(("pyspark", "py4j"))


def _cause(error: BaseException) -> str:
    """The line of a (long, JVM-wrapped) Spark failure that says what went wrong."""
    text = str(error)
    for raw in reversed(text.splitlines()):
        line = raw.strip()
        if "Error: " in line or "Exception: " in line:
            return line[:2000]
    return text.strip().splitlines()[0][:2000] if text.strip() else type(error).__name__


def _manifest(
    plan: BootstrapPlan, written: list[Any], partial: Path, counts: tuple[int, int, int]
) -> Manifest:
    """The manifest of the files ``written`` to ``partial``; ``counts``: records read,
    applied and dead-lettered."""
    read, applied, dead = counts
    marks, bases = plan.marks or {}, plan.bases or {}
    targets: dict[int, TargetState] = {
        j: TargetState(
            files={},
            keys=0,
            offsets=dict(plan.covered.get(j, {})),
            marks={p: m for p, m in marks.get(j, {}).items() if p in plan.covered.get(j, {})},
            bases=dict(bases.get(j, {})),
        )
        for j in sorted(plan.targets)
    }
    for row in sorted(written, key=lambda r: (r["processor"], r["store"], r["path"])):
        target = targets[int(row["processor"])]
        relative = str(Path(row["path"]).relative_to(partial))
        target.files.setdefault(str(row["store"]), []).append(relative)
        target.keys += int(row["keys"])
    return Manifest(
        targets=targets, records_read=read, records_applied=applied, records_dead_lettered=dead
    )


def _placement(plan: BootstrapPlan) -> Placement:
    gained = plan.gained_from
    return Placement(
        initial_processors=plan.initial_processors,
        processors=plan.processors,
        targets=tuple(sorted(plan.targets)),
        topics=tuple(sorted({topic for topic, _ in plan.lineage})),
        lineage=dict(plan.lineage),
        gained_from=None if gained is None else (gained[0], tuple(sorted(gained[1]))),
        inputs=plan.inputs,
    )


def _record_columns(placement: Placement, labels: list[int]) -> list[Column]:
    """The history's columns as the fold takes them, the topic as its index in
    ``placement.topics`` (-1: another topic), its ``mark`` for an app that orders its inputs
    canonically, plus each record's ``group``: the label of
    group ``pmod(hash(key), len(labels))`` (Spark's own hash of the key)."""
    from pyspark.sql import functions as F  # noqa: PLC0415, N812

    topic = F.lit(-1)
    for index, name in reversed(list(enumerate(placement.topics))):
        topic = F.when(F.col("topic") == name, F.lit(index)).otherwise(topic)
    group = F.pmod(F.hash("key"), F.lit(len(labels))) + 1
    marks = [] if placement.inputs is None else [F.col(MARK_COLUMN)]
    return [
        topic.alias("topic"),
        F.col("partition"),
        F.col("offset"),
        F.col("key"),
        F.col("value"),
        F.col("timestamp"),
        F.col("headers"),
        *marks,
        F.element_at(F.array(*(F.lit(label) for label in labels)), group)
        .cast("int")
        .alias("group"),
    ]


def group_labels(groups: int, tasks: int) -> list[int]:
    """For each of ``groups`` groups, an int that Spark's hash partitioning into ``tasks``
    partitions (``pmod(murmur3(value, seed 42), tasks)``) sends to partition ``group %
    tasks``, so every fold task gets the same number of groups. Only the balance depends on
    this: records are grouped by label either way, and a key always has one label."""
    wanted: dict[int, list[int]] = {}
    for group in range(groups):
        wanted.setdefault(group % tasks, []).append(group)
    labels = [0] * groups
    for value in itertools.count():
        waiting = wanted.get(mmh3.hash(struct.pack("<i", value), 42) % tasks)
        if waiting:
            labels[waiting.pop()] = value
            if not any(wanted.values()):
                return labels
    raise AssertionError("unreachable")  # pragma: no cover
