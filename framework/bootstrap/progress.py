"""A running bootstrap's progress: what it reports (``BootstrapProgress``), Spark's task
counts and the job's record counters sampled every second (``SparkProgress``), and a callback
that keeps it in a file (``progress_file_writer``)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pyspark is imported where Spark runs, never at a processor's start
    from pyspark.sql import SparkSession

__all__ = ["BootstrapProgress", "SparkProgress", "progress_file_writer"]


@dataclass
class BootstrapProgress:
    """What a running bootstrap reports: the phase, Spark tasks done, records seen."""

    phase: str = "starting"
    tasks_done: int = 0
    tasks_total: int = 0
    records_read: int = 0
    records_applied: int = 0
    #: records the runtime would dead-letter, not applied (a build writes no dead letters)
    records_dead_lettered: int = 0
    started: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        """The progress as JSON-able values."""
        return {
            "phase": self.phase,
            "tasks_done": self.tasks_done,
            "tasks_total": self.tasks_total,
            "records_read": self.records_read,
            "records_applied": self.records_applied,
            "records_dead_lettered": self.records_dead_lettered,
            "started": self.started,
            "updated": time.time(),
        }


class SparkProgress:
    """Samples Spark's status tracker every second and hands progress to a callback."""

    def __init__(
        self,
        spark: SparkSession,
        progress: BootstrapProgress,
        callback: Callable[[BootstrapProgress], None] | None,
    ) -> None:
        self._spark = spark
        self._progress = progress
        self._callback = callback
        #: records read, applied, dead-lettered (the accumulators of the job's last run)
        self._counters: tuple[Any, ...] = ()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bootstrap-progress", daemon=True)

    def count_with(self, counters: tuple[Any, ...]) -> None:
        """Report these accumulators' counts: records read, applied and dead-lettered (a run
        of the job's own)."""
        self._counters = counters

    def count(self) -> None:
        """Copy the counters' values into the progress."""
        if not self._counters:
            return
        read, applied, dead = (counter.value for counter in self._counters)
        progress = self._progress
        progress.records_read, progress.records_applied = read, applied
        progress.records_dead_lettered = dead

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
        self.count()
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
