"""``splitstate status --watch``: read the app's status every few seconds and show it.

On a terminal the view (``status_live``) is redrawn in place; in plain mode (a pipe, CI,
``TERM=dumb``) each refresh prints the plain report of ``splitstate status`` followed by a
blank line. During a scale, successive samples give each handoff's records/s and ETA.
Ctrl-C ends the watch with exit status 0: it is noted (not raised in the middle of a Kafka
client's call, which could leave the client half closed) and the watch ends at its next
wait, or once the refresh in progress returns (a second Ctrl-C does not wait for it).
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType

from rich.live import Live

from framework.clock import SYSTEM_CLOCK, Clock, StopSignal
from framework.errors import SplitstateError
from framework.ops.escape import printable
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
        lines = "\n".join("  " + printable(h.render()) for h in handoffs)
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
    stop = StopSignal()
    restore = _note_interrupts(stop)
    try:
        sampler = _Sampler(collect, clock)
        if out.live:
            _watch_live(sampler, out, interval, clock, rounds, stop=stop)
        else:
            _watch_plain(sampler, out, interval, clock, rounds, stop=stop)
    except KeyboardInterrupt:
        return 0
    finally:
        restore()
    return 0


def _note_interrupts(stop: threading.Event) -> Callable[[], None]:
    """Make Ctrl-C set ``stop`` instead of raising (in the main thread; elsewhere Python
    delivers no signals); a second one raises. Returns what puts the previous handler back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGINT)

    def interrupted(_signum: int, _frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt  # a second Ctrl-C does not wait for the refresh
        stop.set()

    signal.signal(signal.SIGINT, interrupted)

    def restore() -> None:
        signal.signal(signal.SIGINT, previous)

    return restore


def _refreshing(
    sampler: _Sampler,
    show: Callable[[], None],
    interval: float,
    clock: Clock,
    rounds: int | None,
    *,
    stop: threading.Event,
) -> None:
    """``show()`` the sample, wait ``interval``, refresh; until ``rounds`` or ``stop``."""
    shown = 0
    while True:
        show()
        shown += 1
        if rounds is not None and shown >= rounds:
            return
        if clock.wait(stop, interval):
            return
        sampler.refresh()


def _watch_live(
    sampler: _Sampler,
    out: Terminal,
    interval: float,
    clock: Clock,
    rounds: int | None,
    *,
    stop: threading.Event,
) -> None:
    with Live(
        console=out.console,
        auto_refresh=False,
        redirect_stdout=False,
        # log lines written meanwhile appear above the view, when they share the terminal
        redirect_stderr=sys.stderr.isatty(),
    ) as live:

        def show() -> None:
            view = live_status(
                sampler.status,
                sampler.handoffs,
                updated=sampler.updated,
                every=interval,
                problem=sampler.problem,
            )
            live.update(view, refresh=True)

        _refreshing(sampler, show, interval, clock, rounds, stop=stop)


def _watch_plain(
    sampler: _Sampler,
    out: Terminal,
    interval: float,
    clock: Clock,
    rounds: int | None,
    *,
    stop: threading.Event,
) -> None:
    def show() -> None:
        if sampler.problem is not None:
            out.line(printable(f"cannot refresh: {sampler.problem} (retrying)"))
        else:
            out.line(plain_report(sampler.status, sampler.handoffs))
        out.line("")

    _refreshing(sampler, show, interval, clock, rounds, stop=stop)
