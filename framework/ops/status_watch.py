"""``splitstate status --watch``: read the app's status every few seconds and show it.

On a terminal the view (``status_live``) is redrawn in place; in plain mode (a pipe, CI,
``TERM=dumb``) each refresh prints the plain report of ``splitstate status`` followed by a
blank line. During a scale, successive samples give each handoff's records/s and ETA.
Ctrl-C ends the watch with exit status 0.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from rich.live import Live

from framework.clock import SYSTEM_CLOCK, Clock
from framework.errors import SplitstateError
from framework.ops.progress import CatchUpProgress, HandoffProgress
from framework.ops.status import AppStatus
from framework.ops.status_live import live_status
from framework.ops.status_view import render_status
from framework.ops.terminal import Terminal

__all__ = ["plain_report", "watch_status"]


def plain_report(status: AppStatus, handoffs: list[HandoffProgress]) -> str:
    """The plain report: ``splitstate status``'s text, plus catch-up progress in a scale."""
    text = render_status(status)
    if status.scaling_to is not None and handoffs:
        lines = "\n".join("  " + h.render() for h in handoffs)
        text += f"\n\ncatch-up progress:\n{lines}"
    return text


class _Sampler:
    """Reads the status; after the first read, a failure is kept to show, not raised."""

    def __init__(self, collect: Callable[[], AppStatus], clock: Clock) -> None:
        self._collect = collect
        self._clock = clock
        self._progress = CatchUpProgress()
        self.status = collect()  # a first failure (bad config, no broker) ends the command
        self.handoffs = self._progress.update(self.status, clock.monotonic())
        self.updated = self._stamp()
        self.problem: str | None = None

    def _stamp(self) -> str:
        return time.strftime("%H:%M:%S", time.localtime(self._clock.time()))

    def refresh(self) -> None:
        try:
            status = self._collect()
        except SplitstateError as error:
            self.problem = str(error)
            return
        self.status, self.problem = status, None
        self.handoffs = self._progress.update(status, self._clock.monotonic())
        self.updated = self._stamp()


def watch_status(
    collect: Callable[[], AppStatus],
    out: Terminal,
    interval: float,
    *,
    clock: Clock = SYSTEM_CLOCK,
    rounds: int | None = None,
) -> int:
    """Show ``collect()`` every ``interval`` seconds on ``out`` until Ctrl-C (or ``rounds``
    refreshes); returns the exit status (0)."""
    try:
        sampler = _Sampler(collect, clock)
        if out.live:
            _watch_live(sampler, out, interval, clock, rounds)
        else:
            _watch_plain(sampler, out, interval, clock, rounds)
    except KeyboardInterrupt:
        return 0
    return 0


def _watch_live(
    sampler: _Sampler, out: Terminal, interval: float, clock: Clock, rounds: int | None
) -> None:
    shown = 0
    with Live(
        console=out.console,
        auto_refresh=False,
        redirect_stdout=False,
        # log lines written meanwhile appear above the view, when they share the terminal
        redirect_stderr=sys.stderr.isatty(),
    ) as live:
        while True:
            view = live_status(
                sampler.status,
                sampler.handoffs,
                updated=sampler.updated,
                every=interval,
                problem=sampler.problem,
            )
            live.update(view, refresh=True)
            shown += 1
            if rounds is not None and shown >= rounds:
                return
            clock.sleep(interval)
            sampler.refresh()


def _watch_plain(
    sampler: _Sampler, out: Terminal, interval: float, clock: Clock, rounds: int | None
) -> None:
    shown = 0
    while True:
        if sampler.problem is not None:
            out.line(f"cannot refresh: {sampler.problem} (retrying)")
        else:
            out.line(plain_report(sampler.status, sampler.handoffs))
        out.line("")
        shown += 1
        if rounds is not None and shown >= rounds:
            return
        clock.sleep(interval)
        sampler.refresh()
