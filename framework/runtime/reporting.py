"""A running processor's progress report to Kafka (``framework.coordination.progress_reports``).

Between batches, ``ProgressReporter.tick`` writes the processor's report when one is due:
every ``_SCALE_SECONDS`` while a scale is in progress (a receiver's T2, its bulk build's
progress), at least every ``HEARTBEAT_SECONDS`` otherwise. A report that cannot be written is
logged (once a minute at most) and tried again at the next due time: reports never stop
processing.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import asdict
from pathlib import Path

from framework.app import App
from framework.bootstrap.child_process import bootstrap_directory, read_bootstrap_progress
from framework.coordination.control_log import ControlWatcher
from framework.coordination.progress_reports import (
    HEARTBEAT_SECONDS,
    ProcessorReport,
    write_report,
)
from framework.growth.placement import UNFENCED_SCOPE
from framework.kafka import Kafka, KafkaIOError
from framework.runtime.crashes import skipped_records
from framework.snapshots.transfer_progress import read_transfer_progress, transfer_directory
from statestore import ProcessorDatabase

__all__ = ["ProgressReporter", "directory_size"]

log = logging.getLogger(__name__)

#: how often a report is written while a scale is in progress
_SCALE_SECONDS = 2.0
_WARN_EVERY_SECONDS = 60.0
#: skipped records a report lists at most (the newest are in the processor's state)
_SKIPPED_SHOWN = 50


def directory_size(path: Path) -> int | None:
    """Bytes of the files under ``path`` (``None`` when it is not a directory)."""
    if not path.is_dir():
        return None
    total = 0
    for file in path.rglob("*"):
        try:
            if file.is_file():
                total += file.stat().st_size
        except OSError:  # a file RocksDB deleted meanwhile
            continue
    return total


class ProgressReporter:
    """Writes processor ``processor``'s report to the app's progress topic when due."""

    def __init__(
        self,
        app: App,
        processor: int,
        *,
        kafka: Kafka,
        database: ProcessorDatabase,
        watcher: ControlWatcher,
    ) -> None:
        self._app = app
        self._config = app.config
        self._processor = processor
        self._kafka = kafka
        self._database = database
        self._watcher = watcher
        self._clock = kafka.clock
        self._host = socket.gethostname()
        self._due = float("-inf")
        self._written = float("-inf")
        self._warned = float("-inf")
        self._last: ProcessorReport | None = None

    def tick(self) -> None:
        """Write a report if one is due (cheap when none is)."""
        now = self._clock.monotonic()
        if now < self._due:
            return
        scaling = self._watcher.state.scaling is not None
        self._due = now + (_SCALE_SECONDS if scaling else HEARTBEAT_SECONDS)
        report = self.report()
        if report.same_news(self._last) and now - self._written < HEARTBEAT_SECONDS:
            return
        try:
            write_report(self._kafka, self._config.progress_topic, report)
        except KafkaIOError as error:
            if now - self._warned >= _WARN_EVERY_SECONDS:
                self._warned = now
                log.warning(
                    "processor %d could not write its progress report (status on other "
                    "hosts shows less meanwhile): %s",
                    self._processor,
                    error,
                )
            return
        self._last, self._written = report, now

    def report(self) -> ProcessorReport:
        """The processor's report now."""
        database = self._database
        state = self._watcher.state
        generation = None
        catch_up: dict[tuple[str, int], int] = {}
        bootstrap = transfer = None
        last = state.scale  # the newest scale, in progress or ended (its T2 then stays F)
        if last is not None and any(h.target == self._processor for h in last.handoffs.values()):
            generation = last.generation
            catch_up = database.progress(f"catchup-{generation}")
        if generation is not None and state.scaling is not None:
            found = read_bootstrap_progress(
                bootstrap_directory(self._app, self._processor, generation)
            )
            bootstrap = None if found is None else {**found, "generation": generation}
            progress = read_transfer_progress(
                transfer_directory(self._config.app_state_dir, self._processor, generation)
            )
            transfer = None if progress is None else {**asdict(progress), "generation": generation}
        skipped = skipped_records(database)[-_SKIPPED_SHOWN:]
        return ProcessorReport(
            self._processor,
            self._host,
            os.getpid(),
            self._clock.time(),
            None if database.path is None else directory_size(Path(database.path)),
            generation,
            catch_up,
            bootstrap,
            transfer,
            database.progress(UNFENCED_SCOPE),
            [(s.topic, s.partition, s.offset, s.crashes, s.at) for s in skipped],
        )
