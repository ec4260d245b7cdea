"""Durations in the time API: a ``timedelta`` or whole milliseconds."""

from __future__ import annotations

from datetime import timedelta

__all__ = ["Duration", "to_ms"]

#: a length of time: a ``timedelta``, or an ``int`` of milliseconds
Duration = timedelta | int


def to_ms(value: Duration, what: str, *, positive: bool = True) -> int:
    """``value`` in whole milliseconds; ``ValueError`` naming ``what`` when it is negative (or
    zero, with ``positive``) or not a duration."""
    if isinstance(value, timedelta):
        ms = value // timedelta(milliseconds=1)
    elif isinstance(value, int) and not isinstance(value, bool):
        ms = value
    else:
        raise ValueError(
            f"{what} must be a timedelta or whole milliseconds (int), got {value!r}. "
            "Fix: e.g. timedelta(minutes=1) or 60_000."
        )
    if ms < 0 or (positive and ms == 0):
        raise ValueError(
            f"{what} must be {'positive' if positive else 'zero or more'}, got {ms} ms"
        )
    return ms
