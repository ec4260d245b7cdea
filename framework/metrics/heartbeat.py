"""The loop's signs of life, for ``/healthz``.

The processor's loop calls ``beat`` once per step (and long start-up work, such as restoring a
lost state directory from a snapshot, once per slice); the endpoint's thread reads ``age``.
Every long operation of the loop runs in bounded steps between two beats -- a catch-up step
applies at most ``scaling.catchup_batch`` records, a snapshot upload or transfer copies one
slice, a Spark bootstrap runs in a child process that the loop only polls -- so a beat older
than ``metrics.stall_seconds`` means the loop is stuck (a hung function, a deadlock, a call
that never returns): the orchestrator should restart the process.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["Heartbeat"]


class Heartbeat:
    """When the loop last showed life and what it was doing (``activity``).

    Written by the loop's thread, read by the endpoint's: plain attribute stores, which
    Python makes atomic. ``now`` is real monotonic time (health is about the real process,
    also when the run's clock is simulated).
    """

    def __init__(self, stall_seconds: float, now: Callable[[], float] = time.monotonic) -> None:
        self.stall_seconds = stall_seconds
        self._now = now
        self.last = now()
        #: what the loop does: starting, running, stopping, stopped
        self.activity = "starting"

    def beat(self, activity: str | None = None) -> None:
        """The loop is alive now (and, when given, doing ``activity``)."""
        self.last = self._now()
        if activity is not None:
            self.activity = activity

    def age(self) -> float:
        """Seconds since the last beat."""
        return max(0.0, self._now() - self.last)

    def alive(self) -> tuple[bool, str]:
        """Whether the last beat is recent enough, and a one-line reason."""
        age = self.age()
        if self.activity == "stopped":
            return False, "the loop has stopped"
        if age > self.stall_seconds:
            return False, (
                f"the loop made no step for {age:.0f}s (while {self.activity}; the limit is "
                f"metrics.stall_seconds = {self.stall_seconds:g}s): it is stuck"
            )
        return True, f"ok: {self.activity}, last step {age:.1f}s ago"
