"""A joining processor's Spark bootstrap, run in a child process it watches.

``bootstrap: spark`` makes a processor that gains keys in a scale build them with Spark
before it catches up. The job runs as ``python -m framework.bootstrap.child_main REQUEST`` so the
processor keeps running its own partitions meanwhile (a scale-in's receiver is live) and the
JVM goes away with the job. Everything lives in one directory per processor and generation:
``request.json``, ``job.log``, ``progress.json`` (Spark stages, for ``status``), ``pid`` and,
once published, ``output/`` with the manifest. A restarted processor adopts a job that is
still running, or a finished output, instead of starting again.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from framework.app import App
from framework.bootstrap.manifest import MANIFEST_FILE, Manifest
from framework.processing import ProcessorStoppedError
from rebalance.positions import OffsetRange, Position
from statestore.owner_only import private_directory

__all__ = ["BootstrapRun", "bootstrap_directory", "read_bootstrap_progress"]

_TAIL = 2000


def bootstrap_directory(app: App, processor: int, generation: int) -> Path:
    """Where processor ``processor``'s bootstrap for ``generation`` lives."""
    return app.config.bootstrap_dir / f"processor-{processor}-generation-{generation}"


def read_bootstrap_progress(directory: Path) -> dict[str, Any] | None:
    """The last progress a bootstrap job reported (``None`` when there is none)."""
    try:
        data: dict[str, Any] = json.loads((directory / "progress.json").read_text())
    except (OSError, ValueError):
        return None
    return data


class BootstrapRun:
    """One Spark bootstrap job in a child process (or one found finished or running)."""

    def __init__(self, directory: Path, process: subprocess.Popen[bytes] | None) -> None:
        self.directory = directory
        self._process = process

    @property
    def output(self) -> Path:
        """Where the job publishes its SST files and manifest."""
        return self.directory / "output"

    @classmethod
    def start(
        cls,
        app: App,
        *,
        processor: int,
        generation: int,
        processors: int,
        gained_from: tuple[int, Iterable[int]],
        ranges: Mapping[Position, OffsetRange],
        covers: Iterable[Position],
    ) -> BootstrapRun:
        """Start (or adopt) the bootstrap of the keys ``processor`` owns at ``processors``
        and gains from ``gained_from`` = (old processor count, source processors)."""
        if app.spec is None:
            raise ProcessorStoppedError(
                "bootstrap: spark runs the Spark job in a child process that imports the app, "
                "but this app was not loaded from a MODULE:APP spec. Fix: start processors "
                "with `splitstate run MODULE:APP`, or set bootstrap: replay."
            )
        directory = bootstrap_directory(app, processor, generation)
        private_directory(directory)  # its output holds state (statestore.owner_only)
        if (directory / "output" / MANIFEST_FILE).exists():
            return cls(directory, None)  # finished before this processor restarted
        if _running(directory):
            return cls(directory, None)  # still running from before a restart
        request = {
            "app": app.spec,
            "config_file": None if app.config_file is None else str(app.config_file.resolve()),
            "processor": processor,
            "generation": generation,
            "processors": processors,
            "previous_processors": gained_from[0],
            "sources": sorted(gained_from[1]),
            "ranges": [[t, p, r.start, r.end] for (t, p), r in sorted(ranges.items())],
            "covers": [[t, p] for t, p in sorted(covers)],
        }
        (directory / "request.json").write_text(json.dumps(request, indent=1))
        (directory / "progress.json").unlink(missing_ok=True)
        with (directory / "job.log").open("wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "framework.bootstrap.child_main", str(directory)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        (directory / "pid").write_text(str(process.pid))
        return cls(directory, process)

    def poll(self) -> Manifest | None:
        """The manifest once the job finished; ``None`` while it runs.

        Raises ``ProcessorStoppedError`` with the job's own explanation when it failed.
        """
        if self._process is not None and self._process.poll() is None:
            return None
        if self._process is None and _running(self.directory):
            return None
        if (self.output / MANIFEST_FILE).exists():
            return Manifest.read(self.output)
        log = self.directory / "job.log"
        tail = log.read_text(errors="replace")[-_TAIL:] if log.exists() else "(no log)"
        reason = next(
            (line for line in reversed(tail.splitlines()) if "error" in line.lower()),
            tail.strip().splitlines()[-1] if tail.strip() else "unknown",
        )
        raise ProcessorStoppedError(
            f"the Spark bootstrap in {self.directory} failed: {reason.strip()}. Nothing was "
            f"ingested; the old owner keeps processing. Fix the cause (see {log}) and restart "
            "the processor, or set bootstrap: replay to rebuild by replaying the topic."
        )

    def progress(self) -> dict[str, Any] | None:
        """The job's last reported progress."""
        return read_bootstrap_progress(self.directory)

    def cancel(self) -> None:
        """Stop the job (a processor shutting down does not leave it running)."""
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._process.kill()


def _running(directory: Path) -> bool:
    """Whether the job recorded in ``directory/pid`` is still alive."""
    try:
        pid = int((directory / "pid").read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return False
    # the child's module, or its name before 0.1's subsystem folders (a job started then)
    module = b"framework.bootstrap.child_main" in cmdline or b"framework.bootstrap_job" in cmdline
    return module and str(directory).encode() in cmdline
