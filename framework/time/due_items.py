"""A key's due item as a tick fires it, and as a crash guard names the one a death interrupted;
when the key's items are due next (``due_times``: what ``DUE_STORE`` holds for it).

``DueItem`` is ``(domain, due, rank, store, name)``: the order a key's items fire in at one
time (domain 0: event time, 1: processing time; rank ``EXPIRY``, ``CLOSE`` or ``TIMER``; then
store and name). Every reader that applies a tick to a key fires the key's items in that
order, so an item names the same work wherever it runs (``framework.runtime.tick_guard``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import framework.time.window_state as windows_of
from framework.time.key_clock import KeyClock
from framework.time.specs import WindowSpec
from statestore.due_index import NEVER

__all__ = ["CLOSE", "EXPIRY", "TIMER", "DueItem", "describe_item", "due_times"]

#: a due item's rank: a value expiring, a window closing, a timer firing (in that order)
EXPIRY, CLOSE, TIMER = 0, 1, 2

#: one due item of a key: ``(domain, due, rank, store, name)``
DueItem = tuple[int, int, int, str, str]


def describe_item(item: DueItem) -> str:
    """A due item, for people: ``timer 'name' of store 'store' (due T ms)``, ..."""
    _domain, due, rank, store, name = item
    if rank == TIMER:
        return f"timer {name!r} of store {store!r} (due {due} ms)"
    if rank == CLOSE:
        return f"window of store {store!r} closing at {due} ms"
    return f"expiry of store {store!r} at {due} ms"


def due_times(
    clock: KeyClock, windows: Mapping[str, WindowSpec], timers: Collection[str] | None
) -> tuple[int, int]:
    """``(event, wall)``: when something of the key is due next by its time and by its
    processing time (``NEVER``: nothing); what ``DUE_STORE`` holds for it. Timers count only
    of ``timers`` (all of them when ``None``)."""
    expiries = clock.expiries
    due = min(expiries.values()) if expiries else NEVER
    for store, data in clock.windows.items():
        spec = windows.get(store)
        if spec is not None and data:
            due = min(due, windows_of.next_close(spec.kind, data))
    if not clock.timers:  # (per record: most keys have none)
        return due, NEVER
    for store, entries in clock.timers.items():
        if timers is None or store in timers:
            for at, kind in entries.values():
                if kind == "event":
                    due = min(due, at)
    return due, clock.wall_due(timers)
