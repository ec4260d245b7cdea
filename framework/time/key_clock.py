"""A key's time record: its key time, its open windows, its timers and its values' expiries.

One JSON value per key in store ``TIME_STORE``, stored under the key like any state, so it
lives in the key's range of the store layout: range deletes, snapshot transfers, Spark's SST
files and purges move it with the key. Its earliest due times are kept beside it in
``DUE_STORE`` for the ``DueIndex`` (a tick asks it which keys have something due).

The key's **time** is the largest event time of its records (per input, ``times``) or of the
recorded floors applied to it (``floor``); its **wall** is the largest recorded processing
time applied to it. Both only grow, and both come from the key's own records and the ticks
read at fixed positions of its partition: never from the wall clock or other keys.

A record carries no processing time, so a processing-time timer set ``delay`` after "now" at a
record waits, as ``[delay, "wall_after"]``, for the next tick applied to the key, and counts
from that tick's processing time (``anchor``); it makes the key due at any tick (``PENDING``).
"""

from __future__ import annotations

import base64
from collections.abc import Collection, Iterable
from typing import Any

import orjson

from statestore.due_index import NEVER

__all__ = ["TIME_STORE", "DamagedTimeError", "KeyClock", "TimerEntry"]

#: the store of the keys' time records (a reserved name: ``framework.app``)
TIME_STORE = "splitstate.time"
#: no time yet
NO_TIME = -(1 << 63)

#: a timer: ``(due time, "event" | "wall")``, or ``(delay, "wall_after")``: a processing-time
#: timer set at a record, due ``delay`` after the processing time of the next tick applied
TimerEntry = tuple[int, str]
#: the kinds of timer a record holds
TIMER_KINDS = frozenset({"event", "wall", "wall_after"})
#: the processing-time due of a key with a ``"wall_after"`` timer: below every tick's ``wall``
#: (``ticks.TIME_LIMIT``), so the next tick applies to the key and anchors it
PENDING = -(1 << 62)
#: the fields of a stored record
_FIELDS = frozenset({"t", "f", "p", "tm", "w", "x"})
_EMPTY: dict[str, object] = {}
#: the fields of a key's record that holds only times and windows
_TIMES_AND_WINDOWS = frozenset({"t", "w"})
#: the stored times' bounds: a due time holds 64 bits (``statestore.due_index``)
_LOW, _HIGH = -(1 << 63), (1 << 63) - 1


def _all_ms(values: Iterable[object]) -> bool:
    """Whether each of ``values`` is whole milliseconds a stored due time holds."""
    return all(type(value) is int and _LOW <= value <= _HIGH for value in values)


class DamagedTimeError(ValueError):
    """A key's stored time record is not in the form this module writes (a damaged or forged
    state file, a snapshot from elsewhere); the message says what is wrong with it."""


def _check(data: object) -> None:
    """Raise ``DamagedTimeError`` unless ``data`` (a record, parsed) has the form ``encode``
    writes (window data by its kind: ``window_state.check``). Per record, so plain loops:
    orjson gives exact ``dict``, ``list`` and ``int`` (``type(True) is not int``)."""
    if type(data) is not dict or type(data.get("t")) is not dict or not _FIELDS.issuperset(data):
        raise DamagedTimeError(f"not an object with the fields {sorted(_FIELDS)}")
    for name in ("f", "p"):
        value = data.get(name, 0)
        if type(value) is not int or not _LOW <= value <= _HIGH:
            raise DamagedTimeError("its fields 'f' and 'p' are not whole milliseconds (64 bits)")
    for name in ("t", "x"):
        times = data.get(name, _EMPTY)
        if type(times) is not dict or not _all_ms(times.values()):
            raise DamagedTimeError(
                f"its field {name!r} does not map names to milliseconds (64 bits)"
            )
    timers = data.get("tm", _EMPTY)
    if type(timers) is not dict:
        raise DamagedTimeError("its field 'tm' does not map timer stores to their timers")
    for entries in timers.values():
        if type(entries) is not dict:
            raise DamagedTimeError("its field 'tm' does not map timer stores to their timers")
        for entry in entries.values():
            if not (
                type(entry) is list
                and len(entry) == 2  # (due, kind)
                and type(entry[0]) is int
                and _LOW <= entry[0] <= _HIGH
                and entry[1] in TIMER_KINDS
            ):
                raise DamagedTimeError(f"a timer is not [ms (64 bits), kind]: {entry!r}")
    if type(data.get("w", _EMPTY)) is not dict:
        raise DamagedTimeError("its field 'w' does not map window stores to their windows")


def _times_and_windows(data: object) -> bool:
    """Whether ``data`` is a well-formed record of times and windows only, as most are (one
    that is not is checked field by field, and what is wrong named)."""
    if type(data) is not dict or not data.keys() <= _TIMES_AND_WINDOWS:
        return False
    times = data.get("t")
    if type(times) is not dict or type(data.get("w", _EMPTY)) is not dict:
        return False
    for value in times.values():  # (a loop: per record, faster than all() of a generator)
        if type(value) is not int or not _LOW <= value <= _HIGH:
            return False
    return True


#: the attributes of a clock (what equal clocks have equal)
_ATTRIBUTES = ("times", "floor", "wall", "timers", "windows", "expiries")
_loads, _dumps, _SORTED = orjson.loads, orjson.dumps, orjson.OPT_SORT_KEYS
_new = object.__new__


class KeyClock:
    """One key's time record, loaded for a record or a tick, saved when changed.

    ``times``: input topic -> the largest event time of the key's records there; ``floor``:
    the largest recorded floor applied to the key; ``wall``: the largest recorded processing
    time applied to it; ``timers``: timer store -> timer name -> ``(due, kind)``;
    ``windows``: window store -> its open windows (as ``framework.time.window_state`` keeps
    them); ``expiries``: store -> when the key's value there expires (key time). ``time``,
    the key's time (``NO_TIME`` before its first record or floor), is kept as ``observe`` and
    ``raise_floor`` move it (it is read per record, many times)."""

    __slots__ = ("expiries", "floor", "time", "timers", "times", "wall", "windows")

    def __init__(
        self,
        times: dict[str, int] | None = None,
        *,
        floor: int = NO_TIME,
        wall: int = NO_TIME,
        timers: dict[str, dict[str, TimerEntry]] | None = None,
        windows: dict[str, Any] | None = None,
        expiries: dict[str, int] | None = None,
    ) -> None:
        self.times: dict[str, int] = {} if times is None else times
        self.floor = floor
        self.wall = wall
        self.timers: dict[str, dict[str, TimerEntry]] = {} if timers is None else timers
        self.windows: dict[str, Any] = {} if windows is None else windows
        self.expiries: dict[str, int] = {} if expiries is None else expiries
        self.time = max(floor, max(self.times.values(), default=NO_TIME))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, KeyClock):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in _ATTRIBUTES)

    __hash__ = None  # type: ignore[assignment]  # (mutable, compared by value)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in _ATTRIBUTES)
        return f"KeyClock({fields})"

    def observe(self, topic: str, t: int) -> None:
        """Take event time ``t`` of a record of ``topic``."""
        if t > self.times.get(topic, NO_TIME):
            self.times[topic] = t
            self.time = max(self.time, t)

    def raise_floor(self, floor: int) -> None:
        """Take a tick's floor."""
        if floor > self.floor:
            self.floor = floor
            self.time = max(self.time, floor)

    def empty(self) -> bool:
        """Whether nothing but time is kept: no timer, no window, no expiry."""
        return not (self.timers or self.windows or self.expiries)

    @classmethod
    def decode(cls, raw: bytes | None) -> KeyClock:
        """The record stored as ``raw`` (a new one for ``None``); ``DamagedTimeError`` when
        it is not in the form ``encode`` writes (its windows' data is not checked here: by
        kind, ``window_state.check``)."""
        if raw is None:
            return cls()
        try:
            data = _loads(raw)
        except orjson.JSONDecodeError as error:
            raise DamagedTimeError(f"not JSON ({error})") from None
        if not _times_and_windows(data):  # (most records: checked at once)
            _check(data)
        # (per record, so built directly: only what JSON cannot hold as the clock does is
        # converted)
        clock = _new(cls)
        times = clock.times = data["t"]
        get = data.get
        time = clock.floor = get("f", NO_TIME)
        clock.wall = get("p", NO_TIME)
        timers = get("tm")
        clock.timers = (
            {
                store: {n: (e[0], e[1]) for n, e in entries.items()}
                for store, entries in timers.items()
            }
            if timers
            else {}
        )
        clock.windows = get("w") or {}
        clock.expiries = get("x") or {}
        for t in times.values():
            time = max(time, t)
        clock.time = time
        return clock

    @classmethod
    def readable(cls, raw: bytes) -> dict[str, Any]:
        """The stored record ``raw`` for people (``state dump``): its fields by name, times in
        ms (``None``: none yet); one that cannot be read as ``{"unreadable": base64}``."""
        try:
            clock = cls.decode(raw)
        except DamagedTimeError:
            return {"unreadable": base64.b64encode(raw).decode("ascii")}
        return {
            "time": None if clock.time == NO_TIME else clock.time,
            "times": clock.times,
            "floor": None if clock.floor == NO_TIME else clock.floor,
            "wall": None if clock.wall == NO_TIME else clock.wall,
            "timers": {
                store: {
                    name: {"delay" if kind == "wall_after" else "due": due, "kind": kind}
                    for name, (due, kind) in entries.items()
                }
                for store, entries in clock.timers.items()
            },
            "windows": clock.windows,
            "expiries": clock.expiries,
        }

    def encode(self) -> bytes:
        """The stored form (keys sorted: equal records are equal bytes)."""
        data: dict[str, Any] = {"t": self.times}
        if self.floor != NO_TIME:
            data["f"] = self.floor
        if self.wall != NO_TIME:
            data["p"] = self.wall
        if self.timers:
            data["tm"] = {s: {n: list(e) for n, e in t.items()} for s, t in self.timers.items()}
        if self.windows:
            data["w"] = self.windows
        if self.expiries:
            data["x"] = self.expiries
        # an exact-size copy (orjson's own result keeps its ~4 KiB work buffer, and the value
        # cache holds these): a slice and its closing brace, cheaper than bytes(memoryview())
        return _dumps(data, option=_SORTED)[:-1] + b"}"

    def wall_due(self, stores: Collection[str] | None = None) -> int:
        """The earliest processing-time timer (of ``stores``, when given; ``NEVER``: none;
        ``PENDING``: one that waits for a tick to count from)."""
        return min(
            (
                PENDING if kind == "wall_after" else due
                for store, entries in self.timers.items()
                if stores is None or store in stores
                for due, kind in entries.values()
                if kind != "event"
            ),
            default=NEVER,
        )

    def anchor(self, now: int, stores: Collection[str]) -> bool:
        """Count the ``"wall_after"`` timers of ``stores`` from processing time ``now`` (a
        tick's, applied to the key); whether there was one."""
        anchored = False
        for store, entries in self.timers.items():
            if store in stores:
                for name, (delay, kind) in list(entries.items()):
                    if kind == "wall_after":
                        entries[name] = (now + delay, "wall")
                        anchored = True
        return anchored
