"""The clock: the one place splitstate reads time, waits, and starts background work.

Every timeout, backoff, lease and wait in the runtime, the coordination and the growth code is
measured with a ``Clock``. ``SYSTEM_CLOCK`` is the real one (``time.monotonic``, ``time.time``,
``time.sleep``, daemon threads); the deterministic simulation (``tests/sim``) gives the same
code a simulated clock whose time only moves when the simulated world lets it, and whose
background work is one more party of its seeded schedule.

Background work is stopped by its owner (an ``Event`` it ``wait``s on) and joined through the
``Task`` that ``start`` returns, so it never outlives the clients it uses.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["SYSTEM_CLOCK", "Clock", "StopSignal", "SystemClock", "Task"]

#: What an owner sets to tell its background work to return (``Clock.wait`` watches it).
StopSignal = threading.Event


class Task(Protocol):
    """Background work that ``Clock.start`` started."""

    def join(self, timeout: float | None = None) -> None:
        """Wait until the work returned (at most ``timeout`` seconds)."""
        ...


class Clock(Protocol):
    """Time, waiting, and background work."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (only differences mean anything)."""
        ...

    def time(self) -> float:
        """Seconds since the epoch (wall time)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``."""
        ...

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        """Wait ``seconds``, or less once ``stop`` is set; returns whether it is set."""
        ...

    def start(self, name: str, target: Callable[[], None]) -> Task:
        """Run ``target`` in the background (it must return once its owner tells it to)."""
        ...


class SystemClock:
    """The real clock: the ``time`` module and daemon threads."""

    def monotonic(self) -> float:
        """``time.monotonic()``."""
        return time.monotonic()

    def time(self) -> float:
        """``time.time()``."""
        return time.time()

    def sleep(self, seconds: float) -> None:
        """``time.sleep(seconds)``."""
        time.sleep(seconds)

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        """``stop.wait(seconds)``: returns as soon as ``stop`` is set."""
        return stop.wait(seconds)

    def start(self, name: str, target: Callable[[], None]) -> Task:
        """Start ``target`` on a daemon thread named ``name`` (the thread is the task)."""
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        return thread


#: The real clock every process uses unless given another (the simulation gives its own).
SYSTEM_CLOCK: Clock = SystemClock()
