"""The local supervisor behind ``splitstate run --all``: every processor as a child process.

It runs each processor the control log gives work (the generation in force, plus joining
ones during a scale), restarts a processor that crashes (with back-off: 1 s doubling to 30 s,
reset after a minute of health), leaves alone one that stopped on purpose (exit 0: it left in
a scale-in; 4: ``on_error: stop``), writes the children's pids to
``<state_dir>/supervisor.json`` and, on SIGTERM or SIGINT, stops them all gracefully (SIGTERM,
then SIGKILL after a grace period). It applies a changed ``processors`` in the config file
(checked every few seconds, and on SIGHUP) by starting a scale; a count that cannot be
applied yet (a scale in progress) stays pending and is applied once it can.
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

from framework.app import App
from framework.config import AppConfig, ConfigError
from framework.coordination.scaling import read_control, request_scale
from framework.errors import SplitstateError
from framework.metrics.ports import child_environment
from framework.ops.progress import CatchUpProgress
from framework.ops.status import collect_status
from framework.runtime.log_context import note_generation
from statestore.owner_only import private_directory

__all__ = ["EXIT_STOPPED_BY_POLICY", "Supervisor"]

log = logging.getLogger(__name__)

#: A processor exits with this status when it stopped on purpose (do not restart it).
EXIT_STOPPED_BY_POLICY = 4
_MAX_BACKOFF = 30.0
_HEALTHY_AFTER = 60.0
_GRACE = 60.0
_CHECK_SECONDS = 2.0


@dataclass
class _Child:
    processor: int
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    backoff: float = 1.0
    restart_at: float = 0.0
    restarts: int = 0
    done: bool = False
    stopped_by_policy: bool = False
    history: list[int] = field(default_factory=list)


class Supervisor:
    """Run an app's processors as child processes, following its control log."""

    def __init__(
        self, app: App, app_spec: str, config_file: Path | None, *, log_format: str = "text"
    ) -> None:
        self.app = app
        self.app_spec = app_spec
        self.config_file = config_file
        #: the children log as the supervisor does (``--log-format``)
        self.log_format = log_format
        self.state_dir = app.config.app_state_dir
        self.children: dict[int, _Child] = {}
        self._stopping = False
        self._reload = False
        self._config_stamp = self._stamp()
        self._pending: int | None = None  # a ``processors`` from the config not applied yet
        self._pending_reason: str | None = None
        self._checked = 0.0
        self._progress = CatchUpProgress()
        self._scale_seen: int | None = None

    def command(self, processor: int) -> list[str]:
        """The command line of processor ``processor``."""
        command = [sys.executable, "-m", "framework.ops.cli", "run", self.app_spec]
        command += ["--processor-id", str(processor), "--supervised"]
        if self.config_file is not None:
            command += ["--config", str(self.config_file)]
        return [*command, "--log-format", self.log_format]

    def run(self) -> int:
        """Supervise until SIGTERM/SIGINT or until every processor stopped on purpose."""

        def stop(_signum: int, _frame: FrameType | None) -> None:
            self._stopping = True

        def reload(_signum: int, _frame: FrameType | None) -> None:
            self._reload = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGHUP, reload)
        self._follow_control_log()
        try:
            while not self._stopping:
                self._watch()
                if time.monotonic() - self._checked >= _CHECK_SECONDS or self._reload:
                    self._apply_config()
                    self._follow_control_log()
                if self.children and all(c.done for c in self.children.values()):
                    break
                time.sleep(0.2)
        finally:
            self._stop_all()
        failed = [
            c.processor
            for c in self.children.values()
            if c.history and c.history[-1] not in (0, -15)
        ]
        return 1 if failed and not self._stopping else 0

    def _follow_control_log(self) -> None:
        """Start every processor that has work and is not running."""
        self._checked = time.monotonic()
        try:
            state = read_control(self.app)
        except SplitstateError as error:
            log.warning("could not read the control log: %s", error)
            return
        note_generation(state)  # the supervisor's log lines name the generation in force
        if state.scaling is not None:
            self._log_progress()
        if state.scale is not None and state.scale.generation != self._scale_seen:
            self._scale_seen = state.scale.generation
            for child in self.children.values():
                child.stopped_by_policy = False  # a new scale (after an abort) may need it again
        wanted = range(max(state.processors or 0, state.scale.new_processors if state.scale else 0))
        if state.generation is None:  # the app never ran: its first processors define it
            wanted = range(self.app.config.processor_count)
        for processor in wanted:
            if state.generation is not None and not state.has_work(processor):
                continue
            child = self.children.setdefault(processor, _Child(processor))
            if child.stopped_by_policy:
                continue
            if child.process is None and (child.done or not child.history):
                child.done = False
                self._start(child)

    def _log_progress(self) -> None:
        """One line per handoff of the scale in progress: a bar, T2 of T1, rate, ETA."""
        try:
            status = collect_status(self.app)
        except SplitstateError as error:
            log.warning("could not read catch-up progress: %s", error)
            return
        for bootstrap in status.bootstraps:
            log.info("%s", bootstrap.render())
        for line in self._progress.update(status):
            log.info("%s", line.render())

    def _stamp(self) -> float | None:
        try:
            return self.config_file.stat().st_mtime if self.config_file else None
        except OSError:
            return None

    def _apply_config(self) -> None:
        """A changed ``processors`` in the config (or SIGHUP) starts a scale.

        A count that cannot be applied yet (a scale or a growth in progress, a count the
        partitions do not allow yet) stays pending and is retried on every check until it is
        applied or the config changes again; why it waits is logged once.
        """
        stamp = self._stamp()
        if stamp != self._config_stamp or self._reload:
            self._config_stamp, self._reload = stamp, False
            try:
                config = AppConfig.load(self.config_file)
            except ConfigError as error:
                log.error("the changed config is invalid, nothing applied: %s", error)
                return
            self.app.configure(config)
            self._pending, self._pending_reason = config.processor_count, None
        if self._pending is not None:
            self._apply_pending(self._pending)

    def _apply_pending(self, wanted: int) -> None:
        """Scale to ``wanted`` processors unless the app is already there or going there."""
        try:
            state = read_control(self.app)
            if state.generation is None:
                return  # the app never ran: its first processors start with the config's count
            scaling = state.scaling
            if (scaling.new_processors if scaling else state.processors) == wanted:
                self._pending, self._pending_reason = None, None
                return
            if scaling is not None:
                self._still_pending(
                    wanted,
                    f"a scale to {scaling.new_processors} processors (generation "
                    f"{scaling.generation}) is in progress; it is applied once that completes",
                )
                return
            scale = request_scale(self.app, wanted)
        except (ConfigError, SplitstateError) as error:
            self._still_pending(wanted, str(error).removesuffix("."))
            return
        self._pending, self._pending_reason = None, None
        log.info(
            "config asks for %d processors: scaling %d -> %d (generation %d)",
            wanted,
            scale.old_processors,
            scale.new_processors,
            scale.generation,
        )

    def _still_pending(self, wanted: int, reason: str) -> None:
        """Say (once per reason) why ``wanted`` processors are not applied yet."""
        if reason == self._pending_reason:
            return
        self._pending_reason = reason
        log.warning(
            "processors: %d is pending: %s. It is retried every %.0fs until it applies or the "
            "config changes.",
            wanted,
            reason,
            _CHECK_SECONDS,
        )

    def environment(self, processor: int) -> dict[str, str]:
        """Processor ``processor``'s environment: this one's, with its metrics port
        (``metrics.port`` + ``processor``) when metrics are on."""
        return child_environment(self.app.config.metrics, processor, os.environ)

    def _start(self, child: _Child) -> None:
        environment = self.environment(child.processor)
        child.process = subprocess.Popen(self.command(child.processor), env=environment)
        child.started = time.monotonic()
        log.info("processor %d started (pid %d)", child.processor, child.process.pid)
        self._write_pids()

    def _watch(self) -> None:
        now = time.monotonic()
        for child in self.children.values():
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
                how = "left (no partitions)" if status == 0 else "stopped on purpose (see its log)"
                log.info("processor %d %s; it is not restarted", child.processor, how)
                child.done = True
                child.stopped_by_policy = status == EXIT_STOPPED_BY_POLICY
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
        running = [
            c for c in self.children.values() if c.process is not None and c.process.poll() is None
        ]
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
        private_directory(self.state_dir)
        pids = {
            str(c.processor): c.process.pid
            for c in self.children.values()
            if c.process is not None and c.process.poll() is None
        }
        data = {"supervisor": os.getpid(), "processors": pids}
        target = self.state_dir / "supervisor.json"
        temporary = target.with_suffix(".json.tmp")
        temporary.write_text(json.dumps(data) + "\n")
        temporary.replace(target)
