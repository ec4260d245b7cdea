"""Plain value types for places in Kafka topics, shared by every layer."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["OffsetRange", "Position"]

#: A partition of a topic: ``(topic, partition)``.
Position = tuple[str, int]


@dataclass(frozen=True, order=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one partition."""

    start: int
    end: int
