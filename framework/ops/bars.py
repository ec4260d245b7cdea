"""Progress bars for commands that wait: rich bars on a terminal, occasional lines otherwise.

``ProgressView(terminal(sys.stderr))`` is a context manager; ``view.add(...)`` gives a
``ProgressTask`` whose ``update`` moves its bar. On a terminal the bars redraw in place
(``rich.progress``); in plain mode (a pipe, CI, ``TERM=dumb``) each task prints a line when it
starts, when its description changes, when it finishes, and at most every ``every`` seconds
in between: ``<description>: <detail>``.
"""

from __future__ import annotations

import sys
from types import TracebackType

from rich.progress import (
    BarColumn,
    Progress,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)

from framework.clock import SYSTEM_CLOCK, Clock
from framework.ops.terminal import Terminal

__all__ = ["ProgressTask", "ProgressView", "wait_with_countdown"]


class ProgressTask:
    """One bar of a ``ProgressView``."""

    def __init__(self, view: ProgressView, task: TaskID | None, description: str) -> None:
        self._view = view
        self._task = task
        self._description = description
        self._printed: float | None = None
        self._finished = False

    def update(
        self,
        completed: float,
        total: float | None,
        detail: str = "",
        description: str | None = None,
    ) -> None:
        """Move the bar to ``completed`` of ``total`` (``None``: not known yet) and show
        ``detail`` beside it; a new ``description`` names what the task does now."""
        changed = description is not None and description != self._description
        if description is not None:
            self._description = description
        done = total is not None and total > 0 and completed >= total
        view = self._view
        if view.progress is not None and self._task is not None:
            view.progress.update(
                self._task,
                completed=completed,
                total=total,
                description=self._description,
                detail=detail,
            )
            return
        now = view.clock.monotonic()
        due = self._printed is None or now - self._printed >= view.every
        if changed or due or (done and not self._finished):
            self._printed = now
            self._finished = done
            text = f"{self._description}: {detail}" if detail else self._description
            view.terminal.line(text)


class ProgressView:
    """Progress bars (on a terminal) or occasional plain lines, for the tasks added."""

    def __init__(self, terminal: Terminal, *, every: float = 5.0, clock: Clock = SYSTEM_CLOCK):
        self.terminal = terminal
        self.every = every
        self.clock = clock
        #: the rich progress display while the view is open on a terminal
        self.progress: Progress | None = None

    def __enter__(self) -> ProgressView:
        if self.terminal.live:
            self.progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(bar_width=30),
                TaskProgressColumn(),
                TextColumn("{task.fields[detail]}"),
                TimeElapsedColumn(),
                console=self.terminal.console,
                refresh_per_second=4,
                # lines printed meanwhile appear above the bars, when they share the terminal
                redirect_stdout=sys.stdout.isatty(),
                redirect_stderr=sys.stderr.isatty(),
            )
            self.progress.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self.progress is not None:
            if error is not None:  # the error says what happened; no half-filled bars left
                for task in self.progress.task_ids:
                    self.progress.update(task, visible=False)
            self.progress.refresh()
            self.progress.stop()
            self.progress = None

    def add(self, description: str, total: float | None = None) -> ProgressTask:
        """A new task's bar (``total`` may come later with ``update``)."""
        task = None
        if self.progress is not None:
            task = self.progress.add_task(description, total=total, detail="")
        return ProgressTask(self, task, description)


def wait_with_countdown(view: ProgressView, description: str, seconds: float) -> None:
    """Wait ``seconds`` on ``view.clock``, with a bar that fills as the time passes and says
    how long is left."""
    task = view.add(description, total=seconds)
    clock = view.clock
    start = clock.monotonic()
    while True:
        elapsed = min(seconds, clock.monotonic() - start)
        left = seconds - elapsed
        task.update(elapsed, seconds, f"{left:.0f}s left of {seconds:.0f}s")
        if left <= 0:
            return
        clock.sleep(min(0.25, left))
