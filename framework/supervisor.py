"""The local supervisor behind ``splitstate run --all``: every processor as a child process.

It restarts a processor that crashes (with back-off: 1 s doubling to 30 s, reset after a
minute of health), leaves alone one that stopped on purpose (``on_error: stop``), writes the
children's pids to ``<state_dir>/supervisor.json`` and, on SIGTERM or SIGINT, stops them all
gracefully (SIGTERM, then SIGKILL after a grace period).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

__all__ = ["EXIT_STOPPED_BY_POLICY", "Supervisor"]

log = logging.getLogger(__name__)

#: A processor exits with this status when it stopped on purpose (do not restart it).
EXIT_STOPPED_BY_POLICY = 4
_MAX_BACKOFF = 30.0
_HEALTHY_AFTER = 60.0
_GRACE = 60.0


@dataclass
class _Child:
    processor: int
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    backoff: float = 1.0
    restart_at: float = 0.0
    restarts: int = 0
    done: bool = False
    history: list[int] = field(default_factory=list)


class Supervisor:
    """Run processors ``0..processors-1`` of an app as child processes."""

    def __init__(
        self, app_spec: str, config_file: Path | None, processors: int, state_dir: Path
    ) -> None:
        self.app_spec = app_spec
        self.config_file = config_file
        self.state_dir = state_dir
        self.children = [_Child(j) for j in range(processors)]
        self._stopping = False

    def command(self, processor: int) -> list[str]:
        """The command line of processor ``processor``."""
        command = [sys.executable, "-m", "framework.cli", "run", self.app_spec]
        command += ["--processor-id", str(processor)]
        if self.config_file is not None:
            command += ["--config", str(self.config_file)]
        return command

    def run(self) -> int:
        """Supervise until SIGTERM/SIGINT or until every processor stopped on purpose."""

        def stop(_signum: int, _frame: FrameType | None) -> None:
            self._stopping = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        for child in self.children:
            self._start(child)
        try:
            while not self._stopping and not all(c.done for c in self.children):
                self._watch()
                time.sleep(0.2)
        finally:
            self._stop_all()
        failed = [c.processor for c in self.children if c.history and c.history[-1] not in (0, -15)]
        return 1 if failed and not self._stopping else 0

    def _start(self, child: _Child) -> None:
        child.process = subprocess.Popen(self.command(child.processor))
        child.started = time.monotonic()
        log.info("processor %d started (pid %d)", child.processor, child.process.pid)
        self._write_pids()

    def _watch(self) -> None:
        now = time.monotonic()
        for child in self.children:
            if child.done:
                continue
            if child.process is None:
                if now >= child.restart_at:
                    child.restarts += 1
                    self._start(child)
                continue
            status = child.process.poll()
            if status is None:
                if now - child.started > _HEALTHY_AFTER:
                    child.backoff = 1.0
                continue
            child.history.append(status)
            child.process = None
            if status in {EXIT_STOPPED_BY_POLICY, 0}:
                log.error(
                    "processor %d stopped (exit %d) and is not restarted; see its log",
                    child.processor,
                    status,
                )
                child.done = True
                continue
            log.warning(
                "processor %d exited with status %d; restarting in %.0fs",
                child.processor,
                status,
                child.backoff,
            )
            child.restart_at = now + child.backoff
            child.backoff = min(child.backoff * 2, _MAX_BACKOFF)

    def _stop_all(self) -> None:
        running = [c for c in self.children if c.process is not None and c.process.poll() is None]
        for child in running:
            assert child.process is not None
            child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + _GRACE
        for child in running:
            assert child.process is not None
            try:
                child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("processor %d did not stop in time; killing it", child.processor)
                child.process.kill()
                child.process.wait()
        self._write_pids()
        log.info("all processors stopped")

    def _write_pids(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        pids = {
            str(c.processor): c.process.pid
            for c in self.children
            if c.process is not None and c.process.poll() is None
        }
        data = {"supervisor": os.getpid(), "processors": pids}
        target = self.state_dir / "supervisor.json"
        temporary = target.with_suffix(".json.tmp")
        temporary.write_text(json.dumps(data) + "\n")
        temporary.replace(target)
