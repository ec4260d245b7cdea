"""``ManualClock``: a ``framework.clock.Clock`` that only moves when a test moves it."""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["ManualClock"]


class ManualClock:
    """Time stands at ``now`` until the test sets it or something sleeps (when allowed:
    ``may_sleep``); each sleep is counted and calls ``on_sleep(count)``. Background work is
    kept in ``started`` for the test to run."""

    def __init__(self, now: float = 0.0, *, may_sleep: bool = True) -> None:
        self.now = now
        self.sleeps = 0
        self.on_sleep: Callable[[int], None] = lambda _count: None
        self.started: list[tuple[str, Callable[[], None]]] = []
        self._may_sleep = may_sleep

    def monotonic(self) -> float:
        """``now``."""
        return self.now

    def time(self) -> float:
        """``now``."""
        return self.now

    def sleep(self, seconds: float) -> None:
        """Move ``now`` on (an error when this clock may not sleep)."""
        if not self._may_sleep:
            raise AssertionError("nothing may wait on this clock")
        self.now += seconds
        self.sleeps += 1
        self.on_sleep(self.sleeps)

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        """``sleep(seconds)`` (counted as one); then whether ``stop`` is set."""
        self.sleep(seconds)
        return stop.is_set()

    def start(self, name: str, target: Callable[[], None]) -> _Kept:
        """Keep ``target`` for the test."""
        self.started.append((name, target))
        return _Kept()


class _Kept:
    """Work a ``ManualClock`` keeps for the test to run: nothing to wait for."""

    def join(self, timeout: float | None = None) -> None:
        """Return at once."""
