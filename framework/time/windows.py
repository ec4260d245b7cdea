"""Window kinds by event time: which windows a timestamp falls into, and when they close.

Windows are aligned to the epoch (a tumbling minute is ``[12:00, 12:01)``), as in Kafka
Streams and Quix Streams. A window ``[start, end)`` closes when its key's time reaches
``end + grace``; a record whose every window is closed by then is late. Sliding windows are
``[t - size, t]`` for each record's ``t`` (both ends included, so each closes when the key's
time passes ``t + grace``); session windows grow while a key's records come less than ``gap``
apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from framework.time.durations import Duration, to_ms

__all__ = ["Hopping", "Session", "Sliding", "Tumbling", "WindowKind"]


@dataclass(frozen=True, init=False)
class Tumbling:
    """Back-to-back windows of ``size``: each timestamp is in exactly one."""

    size: int
    grace: int

    def __init__(self, size: Duration, grace: Duration = 0) -> None:
        object.__setattr__(self, "size", to_ms(size, "Tumbling size"))
        object.__setattr__(self, "grace", to_ms(grace, "Tumbling grace", positive=False))

    def spans(self, t: int) -> list[tuple[int, int]]:
        """The windows ``[start, end)`` that time ``t`` falls into."""
        start = t - t % self.size
        return [(start, start + self.size)]


@dataclass(frozen=True, init=False)
class Hopping:
    """Windows of ``size`` starting every ``step`` (``step < size``: they overlap)."""

    size: int
    step: int
    grace: int

    def __init__(self, size: Duration, step: Duration, grace: Duration = 0) -> None:
        object.__setattr__(self, "size", to_ms(size, "Hopping size"))
        object.__setattr__(self, "step", to_ms(step, "Hopping step"))
        object.__setattr__(self, "grace", to_ms(grace, "Hopping grace", positive=False))
        if self.step > self.size:
            raise ValueError(
                f"Hopping step ({self.step} ms) is longer than its size ({self.size} ms): "
                "some times would be in no window. Fix: a step at most the size."
            )

    def spans(self, t: int) -> list[tuple[int, int]]:
        """The windows ``[start, end)`` that time ``t`` falls into, oldest first."""
        last = t - t % self.step
        first = last - (self.size - 1) // self.step * self.step
        return [
            (start, start + self.size)
            for start in range(first, last + 1, self.step)
            if start <= t < start + self.size
        ]


@dataclass(frozen=True, init=False)
class Sliding:
    """For each record at ``t``, the window ``[t - size, t]`` of the key's records; it closes
    when the key's time passes ``t + grace``."""

    size: int
    grace: int

    def __init__(self, size: Duration, grace: Duration = 0) -> None:
        object.__setattr__(self, "size", to_ms(size, "Sliding size"))
        object.__setattr__(self, "grace", to_ms(grace, "Sliding grace", positive=False))


@dataclass(frozen=True, init=False)
class Session:
    """A key's records less than ``gap`` apart, as one window ``[first, last]``; it closes
    when the key's time reaches ``last + gap + grace``."""

    gap: int
    grace: int

    def __init__(self, gap: Duration, grace: Duration = 0) -> None:
        object.__setattr__(self, "gap", to_ms(gap, "Session gap"))
        object.__setattr__(self, "grace", to_ms(grace, "Session grace", positive=False))


WindowKind = Tumbling | Hopping | Sliding | Session
