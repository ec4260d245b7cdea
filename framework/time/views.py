"""What a processor function gets for a window store, a timer store, or a store whose values
expire: views of one key, like ``KeyState``."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

import framework.time.window_state as windows_of
from framework.records import Output, Record, output_items
from framework.time.context import KeyTime
from framework.time.durations import Duration, to_ms
from framework.time.key_clock import NO_TIME
from framework.time.specs import WindowSpec
from framework.time.ticks import TIME_LIMIT
from framework.time.window_state import LateError, WindowResult
from statestore import KeyState

__all__ = ["ExpiringState", "KeyTimers", "KeyWindows", "WindowAdder", "add_value"]


class KeyWindows:
    """The key's open windows of one window store."""

    __slots__ = ("_spec", "_time")

    def __init__(self, time: KeyTime, spec: WindowSpec) -> None:
        self._time = time
        self._spec = spec

    def add(self, value: Any, at: int | None = None) -> None:
        """Add ``value`` to the windows of event time ``at`` (default: the record's).

        A record whose windows all closed is late: ``LateError`` is raised (the record
        becomes a dead letter, stage ``late``, unless the store has ``on_late``)."""
        time, spec = self._time, self._spec
        t = time.event_time if at is None else at
        if t is None:
            raise ValueError(f"window store {spec.name!r}: add() outside a record needs at=")
        if type(t) is not int and (not isinstance(t, int) or isinstance(t, bool)):
            raise TypeError(
                f"window store {spec.name!r}: an event time is int milliseconds, got {t!r}"
            )
        add_value(time, spec, value, t)

    def open(self) -> list[WindowResult]:
        """The key's open windows and their results now, oldest first."""
        spec = self._spec
        data = self._time.clock.windows.get(spec.name)
        return [
            spec.window_result(self._time.key, start, end, acc)
            for start, end, acc in windows_of.open_results(spec.kind, spec.aggregation, data)
        ]


def add_value(time: KeyTime, spec: WindowSpec, value: Any, t: int) -> None:
    """``KeyWindows.add`` of ``value`` at event time ``t`` (int ms) to window store ``spec``
    of the key's ``time``: its open windows change, or ``LateError``, or ``on_late`` runs."""
    clock = time.clock
    try:
        data, changed = windows_of.add(
            spec.kind, spec.aggregation, clock.windows.get(spec.name), t, value, key_time=clock.time
        )
    except LateError as late:
        if spec.on_late is None:
            raise
        result = spec.on_late(time.record, late)
        if result is not None:
            name = getattr(spec.on_late, "__name__", "on_late")
            time.outputs.extend(output_items(result, f"{name} (on_late of {spec.name!r})"))
        return
    for start, _end, acc in changed:
        if not _keeps(acc):
            raise ValueError(
                f"window store {spec.name!r}: adding {value!r} at {t} ms makes the "
                f"accumulator of the window starting at {start} ms {acc!r}, which JSON "
                "(the window's stored form) cannot keep: NaN and infinite floats would be "
                "stored as null. The record was not added. Fix: leave such values out "
                "(e.g. math.isfinite), or aggregate them to something finite"
            )
    if spec.emit == "current":
        # sessions this record merged into one that starts earlier: gone, so their
        # upserts are deleted (a tombstone each), as Kafka Streams does
        for start in windows_of.merged_away(spec.kind, clock.windows.get(spec.name), data):
            key = time.key + b"@" + str(start).encode()
            time.outputs.append(Output(None, key=key, topic=spec.to))
        for start, end, acc in changed:
            key = time.key + b"@" + str(start).encode()
            value = spec.output_of(time.key, start, end, acc)
            time.outputs.append(Output(value, key=key, topic=spec.to))
    clock.windows[spec.name] = data


class WindowAdder:
    """The processor function ``@app.window`` registers: it adds what ``value`` gives for
    each record to the key's windows of store ``store`` (``framework.time.running`` runs it
    without the views a processor function gets)."""

    __slots__ = ("__name__", "store", "value")

    def __init__(self, store: str, value: Callable[[Record[Any]], Any]) -> None:
        self.store = store
        self.value = value
        self.__name__ = getattr(value, "__name__", "function")

    def __call__(self, record: Record[Any], windows: KeyWindows) -> None:
        """Add the record's value to ``windows``."""
        windows.add(self.value(record))


class KeyTimers:
    """The key's timers of one timer store, by name (setting a name again moves it)."""

    __slots__ = ("_store", "_time")

    def __init__(self, time: KeyTime, store: str) -> None:
        self._time = time
        self._store = store

    @property
    def key_time(self) -> int | None:
        """The key's time (ms; ``None`` before any)."""
        time = self._time.clock.time
        return None if time == NO_TIME else time

    @property
    def wall(self) -> int | None:
        """The key's processing time: the latest recorded tick applied to it, or its time
        when that is later (ms; ``None`` before either). At a tick (a timer's function) that
        is the tick's; at a record, the last tick applied to the key, however long ago."""
        clock = self._time.clock
        now = max(clock.wall, clock.time)
        return None if now == NO_TIME else now

    def dead_letter(self, value: bytes | None, reason: str) -> None:
        """In a timer's function: one part of its work failed on its own (``reason`` says
        how): a dead letter (stage ``timer``) holding ``value``, while the rest of what the
        function does is kept. With ``on_error: stop`` the processor stops instead."""
        self._time.dead.append((value, reason))

    def set(self, at: int, name: str = "timer") -> None:
        """Fire timer ``name`` when the key's time reaches ``at`` (event time, ms)."""
        self._set(name, at, "event")

    def set_after(self, delay: Duration, name: str = "timer") -> None:
        """Fire timer ``name`` ``delay`` after the key's time now (event time)."""
        self._set(name, self._now(self.key_time) + to_ms(delay, "timer delay"), "event")

    def set_wall(self, at: int, name: str = "timer") -> None:
        """Fire timer ``name`` when a recorded processing time reaches ``at`` (ms)."""
        self._set(name, at, "wall")

    def set_wall_after(self, delay: Duration, name: str = "timer") -> None:
        """Fire timer ``name`` ``delay`` of recorded processing time from now: at a tick (a
        timer's function), from its ``wall``; at a record, which carries no processing time,
        from the ``wall`` of the next tick applied to the key (``get`` gives ``(delay,
        "wall_after")`` until then)."""
        ms = to_ms(delay, "timer delay")
        if self._time.ticked:
            self._set(name, self._now(self.wall) + ms, "wall")
        else:
            self._set(name, ms, "wall_after")

    def cancel(self, name: str = "timer") -> None:
        """Forget timer ``name`` (nothing when it is not set)."""
        timers = self._time.clock.timers
        entries = timers.get(self._store)
        if entries is not None and entries.pop(name, None) is not None and not entries:
            del timers[self._store]

    def get(self, name: str = "timer") -> tuple[int, Literal["event", "wall", "wall_after"]] | None:
        """``(due, kind)`` of timer ``name`` (``(delay, "wall_after")``: set at a record by
        ``set_wall_after``, its tick to count from not applied yet), or ``None``."""
        entry = self._time.clock.timers.get(self._store, {}).get(name)
        if entry is None:
            return None
        due, kind = entry
        if kind == "wall_after":
            return due, "wall_after"
        return due, "wall" if kind == "wall" else "event"

    def _now(self, now: int | None) -> int:
        if now is None:
            raise ValueError(
                f"timer store {self._store!r}: the key has no time yet, so a delay has "
                "nothing to count from. Fix: set(at=...) with an absolute time"
            )
        return now

    def _set(self, name: str, at: int, kind: str) -> None:
        if not isinstance(at, int) or isinstance(at, bool):
            raise TypeError(f"a timer's time is int milliseconds, got {at!r}")
        if not isinstance(name, str):
            raise TypeError(f"a timer's name is text (str), got {name!r}")
        if abs(at) > TIME_LIMIT:
            # (a stored due time holds 64 bits: a delay is added to a tick's wall later)
            what = "delay" if kind == "wall_after" else "time"
            raise ValueError(
                f"timer {name!r} of store {self._store!r}: its {what} {at} ms is beyond "
                f"{TIME_LIMIT} ms (2^62 - 1) either way, as event times and ticks are. "
                "Fix: a time or delay within that range"
            )
        self._time.clock.timers.setdefault(self._store, {})[name] = (at, kind)


class ExpiringState:
    """A ``KeyState`` whose value expires ``ttl`` after it was set, by the key's time.

    An expired value reads as missing, and is deleted once the key's time passes its expiry
    (at the key's next record, or a recorded tick of its partition)."""

    __slots__ = ("_default", "_state", "_time")

    def __init__(self, state: KeyState[Any], time: KeyTime, default_ttl: int | None) -> None:
        self._state = state
        self._time = time
        self._default = default_ttl

    @property
    def key(self) -> bytes:
        """The record key this state belongs to."""
        return self._state.key

    @property
    def store_name(self) -> str:
        """The name of the store this state is in."""
        return self._state.store_name

    @property
    def expires(self) -> int | None:
        """When the value expires (key time, ms), or ``None``."""
        return self._time.clock.expiries.get(self._state.store_name)

    def get(self, default: Any = None) -> Any:
        """The value, or ``default`` when it has none or it expired."""
        expires = self.expires
        if expires is not None and expires <= self._time.clock.time:
            return default
        return self._state.get(default)

    def set(self, value: Any, ttl: Duration | None = None) -> None:
        """Replace the value; it expires ``ttl`` (default: the store's) after the key's time
        now, or never when neither is given."""
        name = self._state.store_name
        ms = self._default if ttl is None else to_ms(ttl, f"ttl of store {name!r}")
        self._state.set(value)
        expiries = self._time.clock.expiries
        if ms is None:
            expiries.pop(name, None)
        else:
            now = self._time.clock.time
            if now == NO_TIME:
                raise ValueError(f"store {name!r}: the key has no time yet to count ttl from")
            expiries[name] = now + ms

    def delete(self) -> None:
        """Remove the value."""
        self._state.delete()
        self._time.clock.expiries.pop(self._state.store_name, None)

    def get_field(self, field: str, default: Any = None) -> Any:
        """One field of the value (a dict or model), or ``default``."""
        value = self.get()
        if value is None:
            return default
        if isinstance(value, dict):
            return value.get(field, default)
        return getattr(value, field, default)

    def set_field(self, field: str, value: Any, ttl: Duration | None = None) -> None:
        """Set one field of the dict value (created empty when missing or expired)."""
        current = self.get()
        if current is None:
            current = {}
        if not isinstance(current, dict):
            raise TypeError(
                f"set_field needs a dict value; the store holds {type(current).__name__} "
                "for this key. Fix: use set() with a new value."
            )
        self.set({**current, field: value}, ttl)


def _keeps(data: Any) -> bool:
    """Whether dumped accumulator ``data`` reads back from JSON as it is: no NaN or infinite
    float in it (orjson writes them as ``null``)."""
    if type(data) is int:  # (the common case first)
        return True
    if isinstance(data, float):
        return math.isfinite(data)
    if isinstance(data, list | tuple):
        return all(_keeps(item) for item in data)
    if isinstance(data, dict):
        return all(_keeps(item) for item in data.values())
    return True
