"""A command in a real terminal: a detached tmux session on a private server, read with
``capture-pane``."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.harness import unique

__all__ = ["TmuxPane", "require_tmux"]

#: runs the command (``$2``...) and writes its exit status to ``$1``. tmux's own record of it
#: (``#{pane_dead_status}``) was sometimes never filled in: tmux 3.3a left the process a
#: zombie. The trap keeps the shell alive through a Ctrl-C meant for the command (a handler,
#: not an ignore, so the command gets the default SIGINT and Python its KeyboardInterrupt).
_RECORD_STATUS = 'trap : INT; status_file=$1; shift; "$@"; echo $? > "$status_file"'


def require_tmux() -> str:
    """The tmux binary, or skip the test saying why."""
    found = shutil.which("tmux")
    if found is None:
        pytest.skip("tmux is not installed: the live terminal views need a real terminal")
    return found


class TmuxPane:
    """``command`` running in a ``width`` x ``height`` terminal of its own tmux server
    (``tmux -L <unique>``); the pane stays after the command exits, with its exit status."""

    def __init__(
        self, command: list[str], directory: Path, width: int = 160, height: int = 50
    ) -> None:
        self._tmux = require_tmux()
        self._socket = unique("splitstate-test")
        self._status = directory / f"{self._socket}.status"
        settings = directory / f"{self._socket}.conf"
        settings.write_text(
            f"set -g default-size {width}x{height}\nset -g remain-on-exit on\n"
            "set -g status off\nset -g history-limit 10000\n"
        )
        self._run(
            "-f",
            str(settings),
            "new-session",
            "-d",
            "-s",
            "view",
            shlex.join(["sh", "-c", _RECORD_STATUS, "sh", str(self._status), *command]),
        )

    def _run(self, *args: str) -> str:
        # the server (and so the command) gets this environment without the test process's
        # COLUMNS/LINES (set under pytest), which would override the terminal's real size
        environment = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        done = subprocess.run(
            [self._tmux, "-L", self._socket, *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
            env=environment,
        )
        return done.stdout

    def screen(self, history: bool = False) -> str:
        """What the terminal shows now (plain text); with ``history``, the lines scrolled
        off the top too (once the command exited, tmux's notice may have pushed some)."""
        return self._run("capture-pane", "-p", *(["-S", "-"] if history else []), "-t", "view")

    def wait_for(self, predicate: Callable[[str], bool], timeout: float, what: str) -> str:
        """Poll the screen until ``predicate(screen)`` holds; returns that screen."""
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if predicate(screen):
                return screen
            time.sleep(0.3)
        raise AssertionError(f"timed out waiting for {what}; the terminal shows:\n{screen}")

    def press(self, *keys: str) -> None:
        """Type ``keys`` (tmux key names, e.g. ``C-c``)."""
        self._run("send-keys", "-t", "view", *keys)

    def exit_status(self) -> int | None:
        """The command's exit status, once it has exited (128 + N: killed by signal N)."""
        try:
            return int(self._status.read_text())
        except (OSError, ValueError):  # not yet, or being written
            return None

    def wait_exit(self, timeout: float) -> int:
        """Wait for the command to exit; returns its status."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.exit_status()
            if status is not None:
                return status
            time.sleep(0.3)
        raise AssertionError(f"the command did not exit; the terminal shows:\n{self.screen()}")

    def close(self) -> None:
        """Stop this tmux server (and the command, if it still runs); remove its socket."""
        socket = subprocess.run(
            [self._tmux, "-L", self._socket, "display-message", "-p", "#{socket_path}"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        subprocess.run(
            [self._tmux, "-L", self._socket, "kill-server"], capture_output=True, check=False
        )
        if socket:
            Path(socket).unlink(missing_ok=True)
