"""Loading a key's time record from a batch and saving it back (``KeyTimes``).

A key's time is two stored values: its time record (``TIME_STORE``, ``KeyClock``) and its
earliest due times (``DUE_STORE``, for the ``DueIndex``). ``load`` decodes and checks them per
record, which is much of a record's cost: a caller done with a key's time saves it with
``save_last``, and the key's next ``load`` takes the same clock back instead of decoding, as
long as the key's stored time record is still the very bytes saved from it (any other write,
a rollback, an eviction from the value cache or a dropped batch gives other bytes, which are
decoded). A clock handed out is no longer kept, so one a failed record changed is never
handed out again.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import framework.time.window_state as windows_of
from framework.time.context import KeyTime
from framework.time.due_items import due_times
from framework.time.key_clock import TIME_STORE, DamagedTimeError, KeyClock
from framework.time.specs import TimerSpec, WindowSpec
from statestore import StateBatch
from statestore.due_index import DUE_STORE, NEVER, decode_due, encode_due

__all__ = ["SAVED_CLOCKS", "KeyTimes"]

#: decoded time records kept for the next ``load`` of their keys (``KeyTimes.save_last``)
SAVED_CLOCKS = 16_384


class KeyTimes:
    """The time records of an app's keys, with its window stores and timer stores."""

    def __init__(self, windows: Mapping[str, WindowSpec], timers: Mapping[str, TimerSpec]) -> None:
        self.windows = dict(windows)
        self.timers = dict(timers)
        #: key -> (the time record ``save_last`` stored for it, the clock it encodes), most
        #: recent last
        self._saved: dict[bytes, tuple[bytes, KeyClock]] = {}

    @staticmethod
    def open(batch: StateBatch, key: bytes) -> KeyTime:
        """``key``'s time as ``batch`` holds it (``DamagedTimeError``: not in the form
        splitstate writes; its windows' data is checked by ``load``)."""
        raw = batch.store(TIME_STORE).get(key)
        due = batch.store(DUE_STORE).get(key)
        return KeyTime(key, KeyClock.decode(raw), None if due is None else decode_due(due))

    def load(self, batch: StateBatch, key: bytes) -> KeyTime:
        """``key``'s time as ``batch`` holds it, its windows checked by their kind
        (``DamagedTimeError`` names what is wrong)."""
        raw = batch.store(TIME_STORE).get(key)  # (``open``, inlined: per record)
        due = batch.store(DUE_STORE).get(key)
        loaded_due = None if due is None else decode_due(due)
        saved = self._saved.pop(key, None)
        if saved is not None and saved[0] is raw:
            # the very bytes ``save_last`` stored from this clock, which nothing has used
            # since: still what they encode (another write, a rollback, an eviction or a
            # dropped batch gives other bytes, decoded below)
            return KeyTime(key, saved[1], loaded_due)
        time = KeyTime(key, KeyClock.decode(raw), loaded_due)
        for store, data in time.clock.windows.items():
            spec = self.windows.get(store)
            wrong = None if spec is None else windows_of.check(spec.kind, data)
            if wrong is not None:
                raise DamagedTimeError(f"its windows of store {store!r} {wrong}")
        return time

    @staticmethod
    def save(
        batch: StateBatch,
        time: KeyTime,
        windows: Mapping[str, WindowSpec],
        timers: Collection[str] | None = None,
        due: tuple[int, int] | None = None,
    ) -> bytes:
        """Write ``time`` back into ``batch`` (and its due times, when they changed); only
        the timers of ``timers`` (when given: the declared timer stores) count as due, as
        only they fire. ``due``: the clock's ``due_times``, when the caller has them.
        Returns the time record as written."""
        raw = time.clock.encode()
        batch.store(TIME_STORE).set(time.key, raw)
        if due is None:
            due = due_times(time.clock, windows, timers)
        if due == (NEVER, NEVER):
            if time.loaded_due is not None:
                batch.store(DUE_STORE).delete(time.key)
        elif due != time.loaded_due:
            batch.store(DUE_STORE).set(time.key, encode_due(*due))
        return raw

    def save_last(
        self,
        batch: StateBatch,
        time: KeyTime,
        due: tuple[int, int],
    ) -> None:
        """``save`` (``due``: the clock's ``due_times``) for a caller that is done with
        ``time``: nothing may use or change ``time.clock`` after it, as the next ``load`` of
        the key hands that clock out again if the key's stored bytes are still these."""
        raw = self.save(batch, time, self.windows, self.timers, due)
        saved = self._saved
        saved[time.key] = (raw, time.clock)
        if len(saved) > SAVED_CLOCKS:
            del saved[next(iter(saved))]  # (the least recently saved)
