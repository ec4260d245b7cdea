"""A key's versions of one table, as stored in the key's range (store
``splitstate.table.<topic>``): the value over time, and how upserts, tombstones and pruning
change it. Nothing here reads a clock or another key.

Stored as JSON: ``{"t": TIME, "v": [[time, value], ...]}``, oldest first, where ``TIME`` is
the key's **table time** (the largest event time of the key's table records; it only grows)
and each value is the record's value as received: text (``null`` for a tombstone), or
``{"b64": ...}`` for bytes that are no UTF-8 text.

With ``history == 0`` only the version last applied is kept (whatever its time), and a
tombstone deletes the key's record. With ``history > 0`` versions are kept by time: a record
at the time of a kept version replaces it, one between two is inserted between them; the
**horizon** is ``table time - history``; versions at or before it go except the newest of
them (still the answer at the horizon), which goes too when it is a tombstone; a record older
than the horizon is dropped, as Kafka's versioned stores drop one (KIP-889). Reads older than
the horizon get nothing.

A key left with no value (no version, or tombstones only) has no record: a delete of a key
with no version stores nothing, and a deleted key's record goes once a later table record of
the key moves its horizon past the deletion. A tombstone without a time of its own (``at``
``None``: a table whose event time is read from its values) deletes the key as of its table
time, the newest version's time, so it never moves the table time.
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import pairwise
from typing import Any

import orjson

from framework.stored_values import value_from_json, value_to_json

__all__ = ["DamagedTableError", "Versions"]

#: one version: its time, and the value as received (``None``: a tombstone)
Version = tuple[int, bytes | None]


class DamagedTableError(ValueError):
    """A key's stored table record is not in the form ``Versions.encode`` writes."""


class Versions:
    """One key's versions of a table (see the module)."""

    __slots__ = ("items", "time")

    def __init__(self, time: int | None = None, items: list[Version] | None = None) -> None:
        #: the key's table time (``None``: no table record applied yet)
        self.time = time
        #: the kept versions, oldest first
        self.items: list[Version] = items or []

    # -- stored form ------------------------------------------------------------------------

    @classmethod
    def decode(cls, data: bytes | None) -> Versions:
        """The versions stored as ``data`` (``None``: none yet); ``DamagedTableError`` when
        ``data`` is not what ``encode`` writes: not JSON of that shape, a time that is no
        int, versions not in rising time order, or one above the table time."""
        if data is None:
            return cls()
        try:
            stored = orjson.loads(data)
            time = _ms(stored["t"])
            items = [(_ms(at), value_from_json(value)) for at, value in stored["v"]]
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as error:
            raise DamagedTableError(f"a stored table record is damaged: {error}") from None
        times = [at for at, _value in items]
        for earlier, later in pairwise(times):
            if earlier >= later:
                raise DamagedTableError(
                    "a stored table record is damaged: its versions are not in rising time "
                    f"order ({earlier} before {later})"
                )
        if times and times[-1] > time:
            raise DamagedTableError(
                f"a stored table record is damaged: a version's time {times[-1]} is above its "
                f"table time {time}"
            )
        return cls(time, items)

    def encode(self) -> bytes | None:
        """The stored form (``None``: no value kept, only tombstones or nothing: the key's
        record is deleted, as a key with no version reads as one deleted)."""
        if all(raw is None for _at, raw in self.items):
            return None
        return orjson.dumps(
            {"t": self.time, "v": [[at, value_to_json(raw)] for at, raw in self.items]}
        )

    # -- changes ----------------------------------------------------------------------------

    def upsert(self, at: int | None, raw: bytes | None, history: int) -> None:
        """Apply a table record of event time ``at`` whose value is ``raw`` (``None``: a
        tombstone), keeping ``history`` ms of versions (see the module). ``at`` ``None``: a
        tombstone of no time of its own (a table whose event time is in its values), which
        deletes the key as of its table time; a key with no version is left as it is."""
        if at is None:
            if raw is not None:
                raise ValueError("only a tombstone may have no time")
            if self.time is None:
                return
            at = self.time
        if history == 0:
            self.time = at if self.time is None else max(self.time, at)
            self.items = [] if raw is None else [(at, raw)]
            return
        if self.time is not None and at < self.time - history:
            return  # older than the horizon: dropped
        self.time = at if self.time is None else max(self.time, at)
        items = self.items
        index = bisect_right(items, at, key=_time_of)
        if index and items[index - 1][0] == at:
            items[index - 1] = (at, raw)
        else:
            items.insert(index, (at, raw))
        self._prune(self.time - history)

    def _prune(self, horizon: int) -> None:
        """Drop the versions at or before ``horizon`` but the newest of them, the answer at
        the horizon (it too when it is a tombstone: no version answers as well)."""
        items = self.items
        settled = bisect_right(items, horizon, key=_time_of)  # (how many are <= horizon)
        if settled == 0:
            return
        del items[: settled - 1 if items[settled - 1][1] is not None else settled]

    # -- reads ------------------------------------------------------------------------------

    def latest(self) -> bytes | None:
        """The newest version's value (``None``: none, or a tombstone)."""
        return self.items[-1][1] if self.items else None

    def at(self, t: int, history: int) -> bytes | None:
        """The value as of time ``t``: the version with the largest time at or before ``t``;
        ``None`` when there is none, it is a tombstone, or ``t`` is older than the horizon
        (``table time - history``), whose versions are not all kept."""
        if self.time is None or t < self.time - history:
            return None
        index = bisect_right(self.items, t, key=_time_of)
        return self.items[index - 1][1] if index else None


def _time_of(version: Version) -> int:
    return version[0]


def _ms(value: Any) -> int:
    if type(value) is not int:
        raise ValueError(f"a time is not whole milliseconds: {value!r}")
    return value
