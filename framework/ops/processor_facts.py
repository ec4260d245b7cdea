"""What ``status`` knows of each processor that only the processor knows.

A processor whose state is on this machine is read from its state (read-only) and from the
progress files of its bulk builds; any other, or one whose state cannot be read here, is
known by the progress report it writes to Kafka
(``framework.coordination.progress_reports``), so ``status`` on any host shows every
processor. Where it runs (host, pid) is shown only from the report of a running processor
that is not silent: a processor that said it stopped, whose next report is overdue
(``progress_reports.overdue``) or, seen from the same machine and PID namespace, whose pid is
gone (it was killed: it could not say it stopped) shows none, and ``silence`` says why.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from framework.app import App
from framework.bootstrap.child_process import bootstrap_directory, read_bootstrap_progress
from framework.coordination.progress_reports import ProcessorReport, overdue, pid_space
from framework.growth.placement import UNFENCED_SCOPE, UNPLACED_SCOPE
from framework.runtime.crashes import SkippedRecord, skipped_records
from framework.snapshots.transfer_progress import (
    TransferProgress,
    read_transfer_progress,
    transfer_directory,
)
from statestore import ProcessorDatabase, StateStoreError

__all__ = ["BootstrapStatus", "ProcessorFacts", "Silence", "directory_size", "pid_alive"]

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


@dataclass(frozen=True)
class Silence:
    """Why a processor that reported is not shown as running: it said it ``stopped``, its
    pid is gone from this machine (``exited``: killed before it could say so), or its next
    report is overdue (``silent``). ``age``: seconds since its newest report."""

    processor: int
    why: str
    host: str
    pid: int
    age: float
    every: float

    def render(self) -> str:
        """One line for the report."""
        where = f"{self.host}, pid {self.pid}"
        ago = _duration(self.age)
        if self.why == "stopped":
            return f"processor {self.processor} is not running: it stopped {ago} ago ({where})"
        if self.why == "exited":
            return (
                f"processor {self.processor} is not running: its process ({where}) is gone, "
                f"without saying it stopped (killed?); its last report came {ago} ago"
            )
        return (
            f"processor {self.processor} is not reporting: its last report came {ago} ago "
            f"({where}), one is due every {_duration(self.every)} (stopped, killed, stuck, "
            "or cut off from Kafka?)"
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
        self._pid_space = pid_space()

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
        """Its newest report, if that says it runs and it is not silent."""
        report = self.reports.get(processor)
        return None if report is None or self._why_silent(report) else report

    def _why_silent(self, report: ProcessorReport) -> str | None:
        """``stopped``, ``exited`` or ``silent`` (see ``Silence``); ``None`` while it runs."""
        if report.stopped:
            return "stopped"
        if (
            report.pid_space is not None
            and report.pid_space == self._pid_space
            and not pid_alive(report.pid, report.updated)
        ):
            return "exited"
        if overdue(report, self._now):
            return "silent"
        return None

    def silence(self, processor: int) -> Silence | None:
        """Why it is not shown as running though it reported (``None``: it runs, or it never
        reported)."""
        report = self.reports.get(processor)
        why = None if report is None else self._why_silent(report)
        if report is None or why is None:
            return None
        age = max(0.0, self._now - report.updated)
        return Silence(processor, why, report.host, report.pid, age, report.every)

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
            counts: dict[Position, int] | None = None
            if self._local(processor):
                try:
                    with ProcessorDatabase.open_read_only(self._path(processor)) as database:
                        counts = database.progress(scope)
                except StateStoreError:
                    pass  # unreadable here: as it last reported
            if counts is None:
                report = self.reports.get(processor)
                if report is None:
                    counts = {}
                else:
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
                pass  # unreadable here: as it last reported
        report = self.reports.get(processor)
        if report is None:
            return []
        return [SkippedRecord(*fields) for fields in report.skipped]


def _pids(state_dir: Path) -> dict[int, int]:
    """The pids ``splitstate run --all`` on this machine wrote, of processes still alive (a
    supervisor that was killed leaves its file behind)."""
    path = state_dir / "supervisor.json"
    try:
        data = json.loads(path.read_text())
        written = path.stat().st_mtime
    except (OSError, ValueError):
        return {}
    pids = {int(j): int(pid) for j, pid in data.get("processors", {}).items()}
    return {j: pid for j, pid in pids.items() if pid_alive(pid, written)}


def pid_alive(pid: int, since: float) -> bool:
    """Whether process ``pid`` of this machine runs and is the one that ran at wall time
    ``since`` (a process that started later, after the first one ended, is another)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's: it exists
    started = _start_time(pid)
    return started is None or started <= since + 1.0  # the boot time is whole seconds


def _start_time(pid: int) -> float | None:
    """When process ``pid`` started, in wall-clock seconds (Linux; ``None`` elsewhere)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
    except (OSError, StopIteration, ValueError, IndexError):
        return None
    fields = stat.rpartition(")")[2].split()  # after the command name, which may hold spaces
    try:
        ticks = int(fields[19])  # field 22 of the line: start time in clock ticks since boot
    except (IndexError, ValueError):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def _duration(seconds: float) -> str:
    """``42 s``, ``7 min``, ``3 h``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"


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
