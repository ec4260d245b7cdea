"""Catch-up progress of a scale in progress: a bar, T2 of T1 (or F), records/s and an ETA.

``CatchUpProgress.update(status)`` compares each receiver's T2 with the previous sample to
give a rate; the supervisor logs these lines every few seconds during a scale, and
``splitstate status`` samples twice to show them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from framework.ops.status import AppStatus

__all__ = ["CatchUpProgress", "HandoffProgress"]

_BAR = 20


@dataclass(frozen=True)
class HandoffProgress:
    """How far one handoff's receiver has caught up."""

    source: int
    target: int
    phase: str
    done: int
    goal: int
    rate: float | None

    @property
    def fraction(self) -> float:
        """Share of the goal reached (1.0 when there is nothing to read)."""
        return 1.0 if self.goal <= 0 else min(1.0, self.done / self.goal)

    @property
    def eta(self) -> float | None:
        """Seconds to the goal at the current rate."""
        if self.rate is None or self.rate <= 0:
            return None
        return max(0.0, (self.goal - self.done) / self.rate)

    def render(self) -> str:
        """One line with a bar."""
        filled = round(self.fraction * _BAR)
        bar = "#" * filled + "-" * (_BAR - filled)
        rate = "-" if self.rate is None else f"{self.rate:,.0f}/s"
        eta = "-" if self.eta is None else f"{self.eta:.0f}s"
        return (
            f"processor {self.target} <- {self.source} {self.phase:<11} [{bar}] "
            f"{self.fraction:>4.0%}  T2 {self.done:,} of {self.goal:,}  {rate}  ETA {eta}"
        )


class CatchUpProgress:
    """Turns successive ``AppStatus`` samples into progress lines."""

    def __init__(self) -> None:
        self._previous: dict[tuple[int, int], tuple[float, int]] = {}

    def update(self, status: AppStatus, now: float | None = None) -> list[HandoffProgress]:
        """Progress of every handoff in ``status`` (rates need an earlier sample)."""
        now = time.monotonic() if now is None else now
        result = []
        for handoff in status.handoffs:
            done = sum(t2 or 0 for _t, _p, _t1, t2, _f in handoff.partitions)
            goal = sum(
                (final if final is not None else (t1 or 0))
                for _t, _p, t1, _t2, final in handoff.partitions
            )
            key = (handoff.source, handoff.target)
            rate = None
            if key in self._previous:
                then, before = self._previous[key]
                if now > then:
                    rate = max(0.0, (done - before) / (now - then))
            self._previous[key] = (now, done)
            result.append(
                HandoffProgress(handoff.source, handoff.target, handoff.phase, done, goal, rate)
            )
        return result
