"""Applying time to a key: advancing its time, and firing what is due in order.

For a record: the key's time moves to the record's event time if later, then everything due
by then fires (windows close, values expire, timers fire), then the function runs, then
anything it made due fires. For a tick (``framework.time.ticks``): each key that has
something due by the tick's floor or processing time takes them, and everything due fires in
``(time, key)`` order over all those keys (event-time items first, then processing-time
ones). Within a key, items due at the same time fire expiries first, then window closes, then
timers, each by store and name. Nothing here reads a clock.

A key whose stored time record is not in the form splitstate writes (``DamagedTimeError``:
``KeyClock.decode``, and its windows by their kind) is never applied: a record of it fails
(the caller makes it a dead letter), and a tick passes over it, goes on with the other keys
and tells ``damaged`` (a dead letter, once: the key's stored due times are deleted, so no
later tick names it; the record itself is kept as it is, for whoever repairs it).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, NamedTuple

import framework.time.window_state as windows_of
from framework.records import Output
from framework.time.context import KeyTime
from framework.time.due_items import CLOSE, EXPIRY, TIMER, DueItem, due_times
from framework.time.key_clock import TIME_STORE, DamagedTimeError, KeyClock
from framework.time.key_times import KeyTimes
from framework.time.specs import Timer, TimerSpec, WindowSpec
from statestore import BatchStateError, StateBatch
from statestore.due_index import DUE_STORE, NEVER, encode_due

__all__ = [
    "CloseRefuser",
    "CloseRunner",
    "TimeKeeper",
    "TimerRefuser",
    "TimerRunner",
    "due_times",
]

#: timers one key may fire for one record or tick: past it, each timer due is dropped without
#: running (timers that set each other due again at once would otherwise never end)
MAX_FIRINGS = 10_000
_EXPIRY, _CLOSE, _TIMER = EXPIRY, CLOSE, TIMER

#: runs a timer's function for a key: ``(spec, timer, batch) -> outputs``; it handles the
#: function's failure itself (a dead letter), and returns the outputs to emit
TimerRunner = Callable[[TimerSpec, Timer, StateBatch], list[Output]]
#: drops a timer as failed without running it: ``(spec, timer, batch, why) -> outputs``
TimerRefuser = Callable[[TimerSpec, Timer, StateBatch, str], list[Output]]
#: the outputs of a window of a ``final`` store that closed: ``(spec, key, start, end, stored
#: accumulator) -> outputs``; it handles a failure of the result itself (a dead letter)
CloseRunner = Callable[[WindowSpec, bytes, int, int, Any], list[Output]]
#: told of a key a tick passed over: ``(key, its stored time record, what is wrong with it)``
DamagedKey = Callable[[bytes, bytes, str], None]
#: closes such a window without running its result, as failed: ``(spec, key, start, end,
#: accumulator, why) -> outputs``
CloseRefuser = Callable[[WindowSpec, bytes, int, int, Any, str], list[Output]]


class _Due(NamedTuple):
    """One due item of a key: ``(domain, due, rank, store, name)`` orders them (a tuple:
    made per window close, a frozen dataclass is slower to make)."""

    domain: int  # 0: event time, 1: processing time
    due: int
    rank: int
    store: str
    name: str


class TimeKeeper(KeyTimes):
    """Time for an app's keys: its window stores, timer stores and expiring stores (their
    time records loaded and saved as ``KeyTimes`` does)."""

    def __init__(
        self,
        windows: Mapping[str, WindowSpec],
        timers: Mapping[str, TimerSpec],
        run_timer: TimerRunner,
        close: CloseRunner | None = None,
        refuse: TimerRefuser | None = None,
        *,
        expiring: Collection[str] | None = None,
        damaged: DamagedKey | None = None,
        refuse_close: CloseRefuser | None = None,
    ) -> None:
        """``close``: the outputs of a window that closed (default: its result, unguarded);
        ``refuse``: drops a timer past ``MAX_FIRINGS`` or refused at a tick (default:
        ``RuntimeError``); ``damaged``: told of each key a tick passes over (default: its
        ``DamagedTimeError`` is raised); ``refuse_close``: closes a window refused at a tick
        (default: no output);
        ``expiring``: the stores declared with a ttl (default: every store), whose values an
        expiry deletes (one recorded when another store had a ttl is dropped, the value kept:
        its values do not expire now)."""
        super().__init__(windows, timers)
        self._run_timer = run_timer
        self._close = close or _final_output
        self._refuse = refuse
        self._refuse_close = refuse_close or _no_output
        self._expiring = None if expiring is None else frozenset(expiring)
        self._damaged = damaged

    # -- a record ---------------------------------------------------------------------------

    def advance(self, batch: StateBatch, time: KeyTime, topic: str, t: int) -> list[Output]:
        """Take event time ``t`` of a record of ``topic`` into the key's time, and fire what
        is due by then."""
        clock = time.clock
        clock.observe(topic, t)
        time.event_time = t
        loaded = time.loaded_due
        # the due times stored with the key are its clock's as loaded (``save`` keeps them
        # together): nothing fires when none has come, and the clock need not be searched
        if loaded is None or (loaded[0] > clock.time and loaded[1] > clock.wall):
            return []
        return self.fire(batch, time)

    def settle(self, batch: StateBatch, time: KeyTime) -> list[Output]:
        """After a function changed the key's time: fire what it made due, and save."""
        due = due_times(time.clock, self.windows, self.timers)
        outputs: list[Output] = []
        if due[0] <= time.clock.time or due[1] <= time.clock.wall:
            outputs = self.fire(batch, time)
            due = due_times(time.clock, self.windows, self.timers)
        self.save(batch, time, self.windows, self.timers, due)
        return outputs

    def fire(self, batch: StateBatch, time: KeyTime) -> list[Output]:
        """Fire everything of the key due by its time and processing time."""
        clock = time.clock
        if len(clock.windows) == 1 and not clock.timers and not clock.expiries:
            return self._close_due(time)
        outputs: list[Output] = []
        while (item := self._next(time.clock)) is not None:  # (each firing replaces the clock)
            outputs.extend(self._fire(batch, time, item))
        return outputs

    def _close_due(self, time: KeyTime) -> list[Output]:
        """``fire`` for a key whose time holds one window store and nothing else: its windows
        due, oldest first, as ``_next`` and ``_fire`` would close them one by one."""
        clock = time.clock
        ((store, data),) = clock.windows.items()
        spec = self.windows.get(store)
        outputs: list[Output] = []
        if spec is None:
            return outputs  # a window store the app no longer declares: kept, never closed
        kind, aggregation, now = spec.kind, spec.aggregation, clock.time
        while data and windows_of.next_close(kind, data) <= now:
            data, (start, end, acc) = windows_of.close_next(kind, aggregation, data, now)
            if data:
                clock.windows[store] = data
            else:
                del clock.windows[store]
            if spec.emit == "final":
                outputs += self._close(spec, time.key, start, end, acc)
        return outputs

    # -- a tick -----------------------------------------------------------------------------

    def tick(
        self,
        batch: StateBatch,
        keys: Iterable[bytes],
        floor: int,
        wall: int,
        *,
        running: Callable[[bytes, DueItem], None] | None = None,
        refused: Mapping[tuple[bytes, DueItem], str] | None = None,
    ) -> list[Output]:
        """Apply a tick (event-time ``floor``, processing time ``wall``) to those of ``keys``
        that have something due by it, and fire what became due, in ``(time, key)`` order
        over them all. A key with nothing due by the tick is left as it was (its time does
        not take the floor), whoever named it. ``running`` is told each key and item before
        it fires; an item of ``refused`` (key and item -> why) is dropped as failed instead,
        its function not run (a timer's: ``refuse``; a window's result: ``refuse_close``)."""
        loaded: list[KeyTime] = []
        # (domain, due time, key, the key's item, the key's index): by time, then key
        heap: list[tuple[int, int, bytes, _Due, int]] = []
        for key in keys:
            try:
                time = self.load(batch, key)
            except DamagedTimeError as error:
                self._pass_over(batch, key, error)
                continue
            clock = time.clock
            clock.raise_floor(floor)
            clock.wall = max(clock.wall, wall)
            time.ticked = True
            # a processing-time timer set at a record counts from this tick (its first)
            anchored = clock.anchor(max(clock.wall, clock.time), self.timers)
            item = self._next(clock)
            if item is None and anchored:
                loaded.append(time)  # (saved below: nothing of it fires now)
                continue
            if item is None:
                # nothing due by the tick: the key is left as it was, so that which keys a tick
                # changes never depends on what an index of due keys happened to name; but
                # stored due times that have come (of a timer or window store the app no
                # longer declares) are corrected, or every tick would name the key again (and
                # its owner write one for it, ``TickWriter``): decided by the key's stored due
                # times, as every reader that applies ticks decides (``KeyTicks``), not by
                # what the index named
                loaded_due = time.loaded_due
                if loaded_due is not None and (loaded_due[0] <= floor or loaded_due[1] <= wall):
                    self._save_due(batch, time)
                continue
            heap.append((item.domain, item.due, time.key, item, len(loaded)))
            loaded.append(time)
        heapq.heapify(heap)
        outputs: list[Output] = []
        while heap:
            *_order, item, index = heapq.heappop(heap)
            time = loaded[index]
            named = (item.domain, item.due, item.rank, item.store, item.name)
            if running is not None:
                running(time.key, named)
            why = None if refused is None else refused.get((time.key, named))
            outputs.extend(self._fire(batch, time, item, why))
            following = self._next(time.clock)
            if following is not None:
                heapq.heappush(heap, (following.domain, following.due, time.key, following, index))
        for time in loaded:
            self.save(batch, time, self.windows, self.timers)
        return outputs

    def _pass_over(self, batch: StateBatch, key: bytes, error: DamagedTimeError) -> None:
        """A key named by a tick whose time record is damaged: left as it is, but no longer
        due (no later tick names it again), and ``damaged`` is told."""
        if self._damaged is None:
            raise error
        raw = batch.store(TIME_STORE).get(key)
        batch.store(DUE_STORE).delete(key)
        self._damaged(key, b"" if raw is None else bytes(raw), str(error))

    def _save_due(self, batch: StateBatch, time: KeyTime) -> None:
        """Write ``time``'s due times alone (its time record is left as loaded)."""
        due = due_times(time.clock, self.windows, self.timers)
        if due == (NEVER, NEVER):
            batch.store(DUE_STORE).delete(time.key)
        elif due != time.loaded_due:
            batch.store(DUE_STORE).set(time.key, encode_due(*due))

    # -- firing -----------------------------------------------------------------------------

    def _next(self, clock: KeyClock) -> _Due | None:
        """The key's earliest item due by its time (event) or processing time (wall)."""
        now, wall = clock.time, clock.wall
        best: _Due | None = None
        for store, expires in clock.expiries.items():
            if expires <= now:
                best = _min(best, _Due(0, expires, _EXPIRY, store, ""))
        for store, data in clock.windows.items():
            spec = self.windows.get(store)
            if spec is None:
                continue  # a window store the app no longer declares: kept, never closed
            closes = windows_of.next_close(spec.kind, data)
            if closes <= now:
                best = _min(best, _Due(0, closes, _CLOSE, store, ""))
        for store, entries in clock.timers.items():
            if store not in self.timers:
                continue  # a timer store the app no longer declares: kept, never fired
            for name, (due, kind) in entries.items():
                if kind == "wall":
                    if due <= wall:
                        best = _min(best, _Due(1, due, _TIMER, store, name))
                elif kind == "wall_after":
                    continue  # due once a tick anchored it (``KeyClock.anchor``)
                elif due <= now:
                    best = _min(best, _Due(0, due, _TIMER, store, name))
        return best

    def _expire(self, batch: StateBatch, time: KeyTime, store_name: str) -> None:
        """Delete the key's value of ``store_name``, which expired."""
        del time.clock.expiries[store_name]
        if self._expiring is not None and store_name not in self._expiring:
            return  # a store declared without a ttl now: its values do not expire
        try:
            store = batch.store(store_name)
        except BatchStateError:  # a store the app no longer declares: nothing to delete
            return
        store.delete(time.key)

    def _fire(
        self, batch: StateBatch, time: KeyTime, item: _Due, refused: str | None = None
    ) -> list[Output]:
        """Fire ``item`` of the key (``refused``: drop it as failed, saying why, unless it
        runs no function: an expiry)."""
        clock = time.clock
        if item.rank == _EXPIRY:
            self._expire(batch, time, item.store)
            return []
        if item.rank == _CLOSE:
            spec = self.windows[item.store]
            data, (start, end, acc) = windows_of.close_next(
                spec.kind, spec.aggregation, clock.windows[item.store], clock.time
            )
            if data:
                clock.windows[item.store] = data
            else:
                del clock.windows[item.store]
            if spec.emit != "final":
                return []
            if refused is None:
                return self._close(spec, time.key, start, end, acc)
            return self._refuse_close(spec, time.key, start, end, acc, refused)
        entries = clock.timers[item.store]
        due, kind = entries.pop(item.name)
        if not entries:
            del clock.timers[item.store]
        timer = Timer(
            item.store,
            time.key,
            item.name,
            due,
            "wall" if kind == "wall" else "event",
            clock.time,
            max(clock.wall, clock.time),
        )
        timer_spec = self.timers[item.store]
        # the timer function sees and changes the key's time through the same clock
        self.save(batch, time, self.windows, self.timers)
        time.fired += 1
        if time.fired <= MAX_FIRINGS and refused is None:
            outputs = self._run_timer(timer_spec, timer, batch)
        else:
            why = refused or (
                f"the key fired {MAX_FIRINGS} timers at one time, the most one record or tick "
                "may fire: timers that set each other (or themselves) due again at once would "
                "never end. Fix: set them later than timer.time"
            )
            if self._refuse is None:
                raise RuntimeError(f"timer {timer.name!r} of key {timer.key!r}: {why}")
            outputs = self._refuse(timer_spec, timer, batch, why)
        reloaded = self.open(batch, time.key)
        time.clock, time.loaded_due = reloaded.clock, reloaded.loaded_due
        return outputs


def _final_output(spec: WindowSpec, key: bytes, start: int, end: int, acc: Any) -> list[Output]:
    """The output of a window of ``spec`` that closed."""
    return [Output(spec.output_of(key, start, end, acc), key=key, topic=spec.to)]


def _no_output(*_closed: Any) -> list[Output]:
    """A window closed without its result."""
    return []


def _min(best: _Due | None, item: _Due) -> _Due:
    return item if best is None or item < best else best
