"""What an app declares about time: window stores, timer stores, stores whose values expire,
and where an input's event time comes from."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from framework.records import Record
from framework.time.aggregations import Aggregation, Reduce
from framework.time.ticks import TIME_LIMIT
from framework.time.window_state import WindowResult, accumulator
from framework.time.windows import Session, Sliding, WindowKind

__all__ = [
    "EventTime",
    "NoEventTimeError",
    "Timer",
    "TimerSpec",
    "WindowSpec",
    "event_time_of",
]

#: where an input's event time comes from: ``None`` (the Kafka timestamp), a field name of the
#: decoded value, or a function of the record; giving int milliseconds or a ``datetime``
EventTime = str | Callable[[Record[Any]], int | datetime] | None
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


@dataclass(frozen=True)
class WindowSpec:
    """A window store: per key, the open windows of ``kind`` and their ``aggregation``.

    ``emit``: ``"final"`` (once per window, when it closes: the same on every replay) or
    ``"current"`` (every change, keyed ``<key>@<start>``: an idempotent upsert per window; a
    session merged into one that starts earlier gets a tombstone under its key).
    ``to``: the output topic (default: the app's only one). ``result``: turns a
    ``WindowResult`` into the output value (default ``{"start", "end", "value"}``).
    ``on_late``: called with a late record and its ``LateError`` instead of dead-lettering
    it (its outputs are emitted)."""

    name: str
    kind: WindowKind
    aggregation: Aggregation
    emit: Literal["final", "current"] = "final"
    to: str | None = None
    result: Callable[[WindowResult], Any] | None = None
    on_late: Callable[..., Any] | None = None

    def __post_init__(self) -> None:
        if self.emit not in {"final", "current"}:
            raise ValueError(
                f"window store {self.name!r}: emit must be 'final' or 'current', got {self.emit!r}"
            )
        merges = not isinstance(self.aggregation, Reduce) or self.aggregation.merges
        if isinstance(self.kind, Session | Sliding) and not merges:
            raise ValueError(
                f"window store {self.name!r}: {type(self.kind).__name__} windows merge "
                "accumulators, and this Reduce has no merge. Fix: Reduce(..., merge=...)."
            )

    def window_result(self, key: bytes, start: int, end: int, stored: Any) -> WindowResult:
        """The result of a window whose accumulator is stored (dumped) as ``stored`` (or a
        closed sliding window's ``Unmerged`` points, merged here): the aggregation's
        ``result`` of the loaded accumulator."""
        aggregation = self.aggregation
        loaded = aggregation.load(accumulator(stored))
        return WindowResult(key, start, end, aggregation.result(loaded))

    def output_value(self, result: WindowResult) -> Any:
        """The value emitted for ``result``."""
        if self.result is not None:
            return self.result(result)
        return {"start": result.start, "end": result.end, "value": result.value}

    def output_of(self, key: bytes, start: int, end: int, stored: Any) -> Any:
        """``output_value(window_result(key, start, end, stored))`` (without a
        ``WindowResult`` when the store has no ``result``: made per window that closes)."""
        if self.result is not None:
            return self.result(self.window_result(key, start, end, stored))
        aggregation = self.aggregation
        value = aggregation.result(aggregation.load(accumulator(stored)))
        return {"start": start, "end": end, "value": value}


@dataclass(frozen=True)
class TimerSpec:
    """A timer store and the function its timers call: ``function(timer, state)``, with
    ``state`` the ``stores`` (as a processor function gets them)."""

    name: str
    function: Callable[..., Any]
    stores: tuple[str, ...]


@dataclass(frozen=True)
class Timer:
    """A timer that fired: its ``key``, ``name`` and due ``time``; ``kind`` ``"event"`` (by
    the key's time) or ``"wall"`` (by recorded processing time); ``key_time`` and ``wall``:
    the key's time and processing time when it fired."""

    store: str
    key: bytes
    name: str
    time: int
    kind: Literal["event", "wall"]
    key_time: int
    wall: int

    @property
    def key_text(self) -> str:
        """The key as UTF-8 text (undecodable bytes replaced)."""
        return self.key.decode("utf-8", errors="replace")


class NoEventTimeError(ValueError):
    """The record has no event time (no timestamp, no such field, a value that is no time):
    a problem of the record, not of the app's code."""


def event_time_of(source: EventTime) -> Callable[[Record[Any]], int]:
    """A function giving a record's event time in ms from ``source``; it raises
    ``NoEventTimeError`` when the record has none (or one beyond ``TIME_LIMIT`` either way);
    what an event time function raises passes through (a failure of the app's code)."""

    def milliseconds(found: Any, what: str) -> int:
        if isinstance(found, datetime):
            if found.tzinfo is None:
                raise NoEventTimeError(
                    f"{what} is a datetime without a time zone ({found}); event times must "
                    "be absolute. Fix: give it a tzinfo (e.g. timezone.utc), or ms"
                )
            return (found - _EPOCH) // _MS  # exact (float seconds are off by 1 ms at times)
        if isinstance(found, int) and not isinstance(found, bool):
            return in_range(found, what)
        raise NoEventTimeError(f"{what} must be int milliseconds or a datetime, got {found!r}")

    def in_range(found: int, what: str) -> int:
        # a time no tick could hold would become its partition's floor, and its ticks be
        # refused by every reader (``ticks.read_tick``)
        if abs(found) > TIME_LIMIT:
            raise NoEventTimeError(
                f"{what} is {found} ms, beyond the {TIME_LIMIT} ms (either way) event times "
                "may be. Fix: give epoch milliseconds"
            )
        return found

    if source is None:

        def kafka_timestamp(record: Record[Any]) -> int:
            found = record.timestamp
            if found is None:
                raise NoEventTimeError("the record has no Kafka timestamp, so no event time")
            return in_range(found, "the Kafka timestamp")

        return kafka_timestamp

    if isinstance(source, str):
        name = source

        def field(record: Record[Any]) -> int:
            value = record.value
            found = value.get(name) if isinstance(value, dict) else getattr(value, name, None)
            if found is None:
                raise NoEventTimeError(f"the record's value has no event-time field {name!r}")
            return milliseconds(found, f"event-time field {name!r}")

        return field

    function = source

    return lambda record: milliseconds(function(record), "the event time function's result")
