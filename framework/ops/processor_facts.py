"""What ``status`` knows of each processor that only the processor knows.

A processor whose state is on this machine is read from its state (read-only) and from the
progress files of its bulk builds; any other is known by the progress report it writes to
Kafka (``framework.coordination.progress_reports``), so ``status`` on any host shows every
processor. Where it runs (host, pid) is shown only from a report of a running processor at
most ``STALE_SECONDS`` old: a processor that stopped, or was killed, shows none.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from framework.app import App
from framework.bootstrap.child_process import bootstrap_directory, read_bootstrap_progress
from framework.coordination.progress_reports import HEARTBEAT_SECONDS, ProcessorReport
from framework.growth.placement import UNFENCED_SCOPE, UNPLACED_SCOPE
from framework.runtime.crashes import SkippedRecord, skipped_records
from framework.snapshots.transfer_progress import (
    TransferProgress,
    read_transfer_progress,
    transfer_directory,
)
from statestore import ProcessorDatabase, StateStoreError

__all__ = ["STALE_SECONDS", "BootstrapStatus", "ProcessorFacts", "directory_size"]

#: a report older than this no longer says where a processor runs (it writes one at least
#: every ``HEARTBEAT_SECONDS``)
STALE_SECONDS = 3 * HEARTBEAT_SECONDS

_BAR = 20

Position = tuple[str, int]


@dataclass(frozen=True)
class BootstrapStatus:
    """A joining processor's Spark bootstrap, as its job last reported (``bootstrap: spark``)."""

    processor: int
    phase: str
    tasks_done: int
    tasks_total: int
    records_read: int
    records_applied: int
    seconds: float

    def render(self) -> str:
        """One line with a bar over the current Spark stage's tasks."""
        fraction = self.tasks_done / self.tasks_total if self.tasks_total else 0.0
        filled = round(fraction * _BAR)
        bar = "#" * filled + "-" * (_BAR - filled)
        return (
            f"processor {self.processor} Spark bootstrap {self.phase:<8} [{bar}] tasks "
            f"{self.tasks_done}/{self.tasks_total}  {self.records_read:,} records read, "
            f"{self.records_applied:,} folded  {self.seconds:.0f}s"
        )

    @classmethod
    def of(cls, processor: int, progress: dict[str, object]) -> BootstrapStatus:
        """From a job's progress report (its ``progress.json``)."""

        def number(name: str) -> float:
            value = progress.get(name, 0)
            return float(value) if isinstance(value, int | float | str) else 0.0

        return cls(
            processor,
            str(progress.get("phase", "?")),
            int(number("tasks_done")),
            int(number("tasks_total")),
            int(number("records_read")),
            int(number("records_applied")),
            number("updated") - number("started"),
        )


class ProcessorFacts:
    """Each processor's state size, pid, host, catch-up, bulk builds and skipped records:
    from this machine where its state is here, else from its newest report."""

    def __init__(self, app: App, reports: dict[int, ProcessorReport], now: float) -> None:
        self._app = app
        self._now = now
        self._state_dir = app.config.app_state_dir
        self.reports = reports
        self._pids = _pids(self._state_dir)

    def _path(self, processor: int) -> Path:
        return self._state_dir / f"processor-{processor}"

    def _local(self, processor: int) -> bool:
        return (self._path(processor) / "CURRENT").exists()

    def state_bytes(self, processor: int) -> int | None:
        """Bytes of its state directory (here, else as last reported)."""
        size = directory_size(self._path(processor))
        report = self.reports.get(processor)
        return size if size is not None or report is None else report.state_bytes

    def _running(self, processor: int) -> ProcessorReport | None:
        """Its newest report, if that says it runs and is recent (``now`` is wall time)."""
        report = self.reports.get(processor)
        if report is None or report.stopped or self._now - report.updated > STALE_SECONDS:
            return None
        return report

    def pid(self, processor: int) -> int | None:
        """Its process id (under this machine's supervisor, else as a recent report says)."""
        report = self._running(processor)
        return self._pids.get(processor, None if report is None else report.pid)

    def host(self, processor: int) -> str | None:
        """The host a recent report of it came from."""
        report = self._running(processor)
        return None if report is None else report.host

    def catch_up(self, processor: int, generation: int) -> dict[Position, int]:
        """Receiver ``processor``'s T2 per partition in ``generation`` (its state here is
        newer than any report of it; a restored state may even be behind the report)."""
        if self._local(processor):
            try:
                with ProcessorDatabase.open_read_only(self._path(processor)) as database:
                    return database.progress(f"catchup-{generation}")
            except StateStoreError:
                pass
        report = self.reports.get(processor)
        if report is not None and report.catch_up_generation == generation:
            return dict(report.catch_up)
        return {}

    def bootstrap(self, processor: int, generation: int) -> BootstrapStatus | None:
        """Its Spark bootstrap's progress in ``generation`` (here, else as reported)."""
        progress = read_bootstrap_progress(bootstrap_directory(self._app, processor, generation))
        if progress is None:
            report = self.reports.get(processor)
            reported = None if report is None else report.bootstrap
            if reported is None or reported.get("generation") != generation:
                return None
            progress = reported
        return BootstrapStatus.of(processor, progress)

    def transfer(self, processor: int, generation: int) -> TransferProgress | None:
        """Its snapshot transfer's progress in ``generation`` (here, else as reported)."""
        found = read_transfer_progress(transfer_directory(self._state_dir, processor, generation))
        if found is not None:
            return found
        report = self.reports.get(processor)
        reported = None if report is None else report.transfer
        if reported is None or reported.get("generation") != generation:
            return None
        fields = {k: v for k, v in reported.items() if k != "generation"}
        try:
            return TransferProgress(**fields)
        except TypeError:  # a report from another version
            return None

    def unfenced(self, processors: list[int]) -> dict[Position, int]:
        """Records processed without a ``splitstate.count`` header, summed over
        ``processors``, any other processor whose state is here, and any that reported (a
        scaled-in one's count stays)."""
        return self._summed(UNFENCED_SCOPE, processors)

    def unplaced(self, processors: list[int]) -> dict[Position, int]:
        """Records without a ``splitstate.count`` header dead-lettered as misplaced, summed
        as ``unfenced`` sums them."""
        return self._summed(UNPLACED_SCOPE, processors)

    def _summed(self, scope: str, processors: list[int]) -> dict[Position, int]:
        """A count the processors keep per input partition in their state (``scope``:
        ``UNFENCED_SCOPE`` or ``UNPLACED_SCOPE``, also in their reports), summed."""
        here = {
            int(path.name.removeprefix("processor-"))
            for path in self._state_dir.glob("processor-*")
            if path.name.removeprefix("processor-").isdigit()
        }
        total: dict[Position, int] = {}
        for processor in sorted(here | set(processors) | set(self.reports)):
            counts: dict[Position, int] = {}
            if self._local(processor):
                try:
                    with ProcessorDatabase.open_read_only(self._path(processor)) as database:
                        counts = database.progress(scope)
                except StateStoreError:
                    continue
            elif processor in self.reports:
                report = self.reports[processor]
                counts = report.unfenced if scope == UNFENCED_SCOPE else report.unplaced
            for position, count in counts.items():
                total[position] = total.get(position, 0) + count
        return total

    def skipped(self, processor: int) -> list[SkippedRecord]:
        """Records it skipped because they crashed it (here, else as last reported)."""
        if self._local(processor):
            try:
                with ProcessorDatabase.open_read_only(self._path(processor)) as database:
                    return skipped_records(database)
            except StateStoreError:
                return []
        report = self.reports.get(processor)
        if report is None:
            return []
        return [SkippedRecord(*fields) for fields in report.skipped]


def _pids(state_dir: Path) -> dict[int, int]:
    """The pids ``splitstate run --all`` on this machine wrote."""
    try:
        data = json.loads((state_dir / "supervisor.json").read_text())
    except (OSError, ValueError):
        return {}
    return {int(j): int(pid) for j, pid in data.get("processors", {}).items()}


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
