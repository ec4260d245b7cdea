"""The Spark job that builds processors' state from history and writes it as SST files.

Steps, all distributed:

1. *route*: hash each record's key (the runtime's murmur3), keep records whose key belongs to
   a target processor (``bucket(key_hash, B, P')``) and give each a shard (high hash bits);
2. *fold*: per ``(processor, shard)`` group (``applyInPandas``; a key is always in one
   group, so no key's history reaches the driver), order the records by partition lineage
   then offset and fold them with the given ``Fold`` -- the app's own processor function in
   restore mode -- into final ``(store, key, value)`` items;
3. *write*: range-partition the items by ``(processor, store, key)``, sort, and let each task
   stream its runs into SST files (non-overlapping per store, so RocksDB ingests them
   below L0).

Files are written into a hidden ``.partial`` directory; the manifest (files, key counts and
the offsets covered per processor) is written last and the directory renamed into place, so a
half-written bootstrap is never found, let alone ingested.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from framework.bootstrap.errors import BootstrapError
from framework.bootstrap.manifest import Manifest, TargetState
from rebalance.positions import Position

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "BootstrapPlan",
    "BootstrapProgress",
    "Fold",
    "progress_file_writer",
    "run_bootstrap",
    "spark_errors",
]

_ITEMS_SCHEMA = "processor int, store string, key binary, value binary"
_FILES_SCHEMA = "processor int, store string, path string, keys long"


class Fold(Protocol):
    """Folds one group's records (already in processing order) into final state items."""

    def __call__(self, records: pd.DataFrame) -> Iterable[tuple[str, bytes, bytes]]:
        """``(store, stored key, encoded value)`` of every key the records leave state for
        (the stored key, prefix and all, is what the SST files hold and are sorted by)."""
        ...


@dataclass(frozen=True)
class BootstrapPlan:
    """Which processors to build, and how records are placed and ordered.

    ``lineage`` gives each input partition its place in processing order: records of a key
    are applied by ascending ``(lineage, offset)`` (topics in config order, then ancestor
    partitions before the partitions split from them). ``covered`` is, per target, the
    offsets the built state covers. ``gained_from`` = (old processor count, sources) keeps only
    keys whose owner at the old count is one of the sources (a scale's receiver builds the keys
    it gains, never keys it already owns).
    """

    initial_processors: int
    processors: int
    targets: frozenset[int]
    lineage: Mapping[Position, int]
    covered: Mapping[int, Mapping[Position, int]]
    shards: int = 32
    max_file_items: int = 2_000_000
    gained_from: tuple[int, frozenset[int]] | None = None


@dataclass
class BootstrapProgress:
    """What a running bootstrap reports: the phase, Spark tasks done, records seen."""

    phase: str = "starting"
    tasks_done: int = 0
    tasks_total: int = 0
    records_read: int = 0
    records_applied: int = 0
    started: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        """The progress as JSON-able values."""
        return {
            "phase": self.phase,
            "tasks_done": self.tasks_done,
            "tasks_total": self.tasks_total,
            "records_read": self.records_read,
            "records_applied": self.records_applied,
            "started": self.started,
            "updated": time.time(),
        }


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
    from pyspark.sql import functions as F  # noqa: PLC0415, N812
    from pyspark.sql.pandas.functions import pandas_udf  # noqa: PLC0415

    destination = destination.expanduser().resolve()
    partial = destination.with_name(f".{destination.name}.partial-{uuid.uuid4().hex[:8]}")
    partial.mkdir(parents=True)
    progress = BootstrapProgress()
    read_counter = spark.sparkContext.accumulator(0)
    applied_counter = spark.sparkContext.accumulator(0)
    reporter = _ProgressReporter(spark, progress, on_progress, read_counter, applied_counter)
    reporter.start()
    try:
        lineage = spark.createDataFrame(
            [(t, p, rank) for (t, p), rank in plan.lineage.items()],
            "topic string, partition int, lineage int",
        )
        # nondeterministic: evaluated once per row, not again for each column derived from it
        place = pandas_udf(  # type: ignore[call-overload]
            _router(plan, read_counter), "long"
        ).asNondeterministic()
        routed = (
            history.withColumn("route", place("key"))
            .where(F.col("route") >= 0)
            .withColumn("processor", (F.col("route") / plan.shards).cast("int"))
            .withColumn("shard", (F.col("route") % plan.shards).cast("int"))
            # headers travel as JSON text, parsed only if the function reads them
            .withColumn(
                "headers",
                F.when(F.size("headers") > 0, F.to_json("headers")).otherwise(F.lit(None)),
            )
            .drop("route")
        )
        ordered = routed.join(F.broadcast(lineage), ["topic", "partition"], "left")
        items = ordered.groupBy("processor", "shard").applyInPandas(
            _folder(fold, applied_counter), _ITEMS_SCHEMA
        )
        items = items.persist(StorageLevel.MEMORY_AND_DISK)
        progress.phase = "fold"
        total = items.count()
        progress.phase = "write"
        parallelism = max(1, spark.sparkContext.defaultParallelism)
        files = max(parallelism, -(-total // plan.max_file_items)) if total else 1
        written = (
            items.repartitionByRange(files, "processor", "store", "key")
            .sortWithinPartitions("processor", "store", "key")
            .mapInPandas(_writer(partial, plan.max_file_items), _FILES_SCHEMA)
            .collect()
        )
        items.unpersist()
        progress.phase = "publish"
        manifest = _manifest(plan, written, partial, read_counter.value, applied_counter.value)
        manifest.write(partial)
        if destination.exists():
            shutil.rmtree(destination)
        partial.rename(destination)
        progress.phase = "done"
        progress.records_read = read_counter.value
        progress.records_applied = applied_counter.value
        return Manifest.read(destination)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    finally:
        reporter.stop()


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
    plan: BootstrapPlan, written: list[Any], partial: Path, read: int, applied: int
) -> Manifest:
    targets: dict[int, TargetState] = {
        j: TargetState(files={}, keys=0, offsets=dict(plan.covered.get(j, {})))
        for j in sorted(plan.targets)
    }
    for row in sorted(written, key=lambda r: (r["processor"], r["store"], r["path"])):
        target = targets[int(row["processor"])]
        relative = str(Path(row["path"]).relative_to(partial))
        target.files.setdefault(str(row["store"]), []).append(relative)
        target.keys += int(row["keys"])
    return Manifest(targets=targets, records_read=read, records_applied=applied)


def _router(plan: BootstrapPlan, counter: Any) -> Callable[[pd.Series], pd.Series]:
    """A pandas UDF over keys: ``processor * shards + shard`` for a target's key, else -1."""
    b, p, shards = plan.initial_processors, plan.processors, plan.shards
    targets = sorted(plan.targets)
    previous, sources = plan.gained_from or (p, frozenset(targets))
    source_list = sorted(sources)

    def route(keys: pd.Series) -> pd.Series:
        import numpy as np  # noqa: PLC0415
        import pandas as pd  # noqa: PLC0415

        from rebalance import bucket_array, key_hashes  # noqa: PLC0415

        counter.add(len(keys))
        present = keys.notna().to_numpy()
        codes = np.full(len(keys), -1, dtype=np.int64)
        if present.any():
            hashes = np.asarray(key_hashes(keys[present].tolist()), dtype=np.int64)
            processors = bucket_array(hashes, b, p)
            shard = (hashes >> 16) % shards
            owners = bucket_array(hashes, b, previous)
            wanted = np.isin(processors, targets) & np.isin(owners, source_list)
            code = np.where(wanted, processors * shards + shard, -1)
            codes[present] = code
        return pd.Series(codes)

    import pandas  # noqa: PLC0415 - Spark reads the hints as real types

    route.__annotations__ = {"keys": pandas.Series, "return": pandas.Series}
    return route


def _folder(fold: Fold, counter: Any) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def fold_group(records: pd.DataFrame) -> pd.DataFrame:
        import pandas as pd  # noqa: PLC0415

        processor = int(records["processor"].iloc[0])
        counter.add(len(records))
        ordered = records.sort_values(["lineage", "offset"], kind="stable")
        items = list(fold(ordered))
        return pd.DataFrame(
            {
                "processor": pd.Series([processor] * len(items), dtype="int32"),
                "store": pd.Series([store for store, _, _ in items], dtype=object),
                "key": pd.Series([key for _, key, _ in items], dtype=object),
                "value": pd.Series([value for _, _, value in items], dtype=object),
            }
        )

    return fold_group


def _writer(directory: Path, max_items: int) -> Callable[[Iterable[pd.DataFrame]], Any]:
    def write(batches: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        import pandas as pd  # noqa: PLC0415
        from pyspark import TaskContext  # noqa: PLC0415

        from statestore.rocks import write_sst_file  # noqa: PLC0415

        context = TaskContext.get()
        part = context.partitionId() if context is not None else os.getpid()
        rows = (
            row
            for batch in batches
            for row in zip(
                batch["processor"], batch["store"], batch["key"], batch["value"], strict=True
            )
        )
        written: list[tuple[int, str, str, int]] = []
        for (processor, store), run in itertools.groupby(rows, key=lambda r: (r[0], r[1])):
            pairs = ((bytes(key), bytes(value)) for _, _, key, value in run)
            for chunk_index in itertools.count():
                chunk = list(itertools.islice(pairs, max_items))
                if not chunk:
                    break
                folder = directory / f"processor-{int(processor)}" / str(store)
                folder.mkdir(parents=True, exist_ok=True)
                path = folder / f"part-{part:05d}-{chunk_index:03d}.sst"
                keys = write_sst_file(path, chunk)
                written.append((int(processor), str(store), str(path), keys))
        yield pd.DataFrame(written, columns=["processor", "store", "path", "keys"])

    return write


class _ProgressReporter:
    """Samples Spark's status tracker every second and hands progress to a callback."""

    def __init__(
        self,
        spark: SparkSession,
        progress: BootstrapProgress,
        callback: Callable[[BootstrapProgress], None] | None,
        read: Any,
        applied: Any,
    ) -> None:
        self._spark = spark
        self._progress = progress
        self._callback = callback
        self._read = read
        self._applied = applied
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bootstrap-progress", daemon=True)

    def start(self) -> None:
        if self._callback is not None:
            self._thread.start()

    def stop(self) -> None:
        if self._callback is None:
            return
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self._report()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self._report()

    def _report(self) -> None:
        assert self._callback is not None
        tracker = self._spark.sparkContext.statusTracker()
        done = total = 0
        for stage_id in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage_id)
            if info is not None:
                done += info.numCompletedTasks
                total += info.numTasks
        self._progress.tasks_done, self._progress.tasks_total = done, total
        self._progress.records_read = self._read.value
        self._progress.records_applied = self._applied.value
        try:
            self._callback(self._progress)
        except Exception:  # a progress report must never fail the job
            return


def progress_file_writer(path: Path) -> Callable[[BootstrapProgress], None]:
    """A progress callback that keeps ``path`` up to date (JSON, replaced atomically)."""

    def write(progress: BootstrapProgress) -> None:
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_text(json.dumps(progress.to_json()))
        temporary.replace(path)

    return write
