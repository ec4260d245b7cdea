"""A key's time record: its key time, its open windows, its timers and its values' expiries.

One JSON value per key in store ``TIME_STORE``, stored under the key like any state, so it
lives in the key's range of the store layout: range deletes, snapshot transfers, Spark's SST
files and purges move it with the key. Its earliest due times are kept beside it in
``DUE_STORE`` for the ``DueIndex`` (a tick asks it which keys have something due).

The key's **time** is the largest event time of its records (per input, ``times``) or of the
recorded floors applied to it (``floor``); its **wall** is the largest recorded processing
time applied to it. Both only grow, and both come from the key's own records and the ticks
read at fixed positions of its partition: never from the wall clock or other keys.
"""

from __future__ import annotations

import base64
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import orjson

from statestore.due_index import NEVER

__all__ = ["TIME_STORE", "KeyClock", "TimerEntry"]

#: the store of the keys' time records (a reserved name: ``framework.app``)
TIME_STORE = "splitstate.time"
#: no time yet
NO_TIME = -(1 << 63)

#: a timer: ``(due time, "event" | "wall")``
TimerEntry = tuple[int, str]


@dataclass
class KeyClock:
    """One key's time record, loaded for a record or a tick, saved when changed."""

    #: input topic -> the largest event time of the key's records there
    times: dict[str, int] = field(default_factory=dict)
    #: the largest recorded floor applied to the key
    floor: int = NO_TIME
    #: the largest recorded processing time applied to the key
    wall: int = NO_TIME
    #: timer store -> timer name -> (due, kind)
    timers: dict[str, dict[str, TimerEntry]] = field(default_factory=dict)
    #: window store -> its open windows (as ``framework.time.window_state`` keeps them)
    windows: dict[str, Any] = field(default_factory=dict)
    #: store -> when the key's value there expires (key time)
    expiries: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        #: the key's time (``NO_TIME`` before its first record or floor): kept as ``observe``
        #: and ``raise_floor`` move it (read per record, many times)
        self.time = max(self.floor, max(self.times.values(), default=NO_TIME))

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
        """The record stored as ``raw`` (a new one for ``None``)."""
        if raw is None:
            return cls()
        data = orjson.loads(raw)
        # (per record: only what JSON cannot hold as the clock does is converted; a record
        # this module did not write fails here or in ``readable``)
        timers = data.get("tm")
        return cls(
            times=data["t"],
            floor=data.get("f", NO_TIME),
            wall=data.get("p", NO_TIME),
            timers={
                store: {n: (e[0], e[1]) for n, e in entries.items()}
                for store, entries in timers.items()
            }
            if timers
            else {},
            windows=data.get("w") or {},
            expiries=data.get("x") or {},
        )

    @classmethod
    def readable(cls, raw: bytes) -> dict[str, Any]:
        """The stored record ``raw`` for people (``state dump``): its fields by name, times in
        ms (``None``: none yet); one that cannot be read as ``{"unreadable": base64}``."""
        try:
            clock = cls.decode(raw)
        except (orjson.JSONDecodeError, TypeError, ValueError, AttributeError, IndexError):
            return {"unreadable": base64.b64encode(raw).decode("ascii")}
        return {
            "time": None if clock.time == NO_TIME else clock.time,
            "times": clock.times,
            "floor": None if clock.floor == NO_TIME else clock.floor,
            "wall": None if clock.wall == NO_TIME else clock.wall,
            "timers": {
                store: {name: {"due": due, "kind": kind} for name, (due, kind) in entries.items()}
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
        return orjson.dumps(data, option=orjson.OPT_SORT_KEYS)

    def wall_due(self, stores: Collection[str] | None = None) -> int:
        """The earliest processing-time timer (of ``stores``, when given; ``NEVER``: none)."""
        return min(
            (
                due
                for store, entries in self.timers.items()
                if stores is None or store in stores
                for due, kind in entries.values()
                if kind == "wall"
            ),
            default=NEVER,
        )
