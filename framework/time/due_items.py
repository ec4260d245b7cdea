"""A key's due item as a tick fires it, and as a crash guard names the one a death interrupted.

``DueItem`` is ``(domain, due, rank, store, name)``: the order a key's items fire in at one
time (domain 0: event time, 1: processing time; rank ``EXPIRY``, ``CLOSE`` or ``TIMER``; then
store and name). Every reader that applies a tick to a key fires the key's items in that
order, so an item names the same work wherever it runs (``framework.runtime.tick_guard``).
"""

from __future__ import annotations

__all__ = ["CLOSE", "EXPIRY", "TIMER", "DueItem", "describe_item"]

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
