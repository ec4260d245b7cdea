"""Time: event-time windows, timers and values that expire, exact on every replay.

A key's time is the largest event time of its records, or of the recorded ticks applied to
it (``framework.time.ticks``); windows close, timers fire and values expire by it, never by
the wall clock or other keys. Declare them on the app (``App.windows_store``, ``App.window``,
``App.timer``, ``App.store(..., ttl=...)``); functions get ``KeyWindows``, ``KeyTimers`` and
``ExpiringState`` views of their key.
"""

from framework.time.aggregations import Aggregation, Collect, Count, Max, Mean, Min, Reduce, Sum
from framework.time.durations import Duration
from framework.time.specs import EventTime, Timer, TimerSpec, WindowSpec
from framework.time.views import ExpiringState, KeyTimers, KeyWindows
from framework.time.window_state import LateError, WindowResult
from framework.time.windows import Hopping, Session, Sliding, Tumbling, WindowKind

__all__ = [
    "Aggregation",
    "Collect",
    "Count",
    "Duration",
    "EventTime",
    "ExpiringState",
    "Hopping",
    "KeyTimers",
    "KeyWindows",
    "LateError",
    "Max",
    "Mean",
    "Min",
    "Reduce",
    "Session",
    "Sliding",
    "Sum",
    "Timer",
    "TimerSpec",
    "Tumbling",
    "WindowKind",
    "WindowResult",
    "WindowSpec",
]
