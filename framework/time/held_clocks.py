"""The decoded time of the keys a ``TimeKeeper`` saved last, so that the key's next record
need not decode (nor check) what was just written.

An entry is what the keeper wrote for a key: its time record (the very bytes object the batch
holds), its due times' (likewise; ``None``: none stored) and the ``KeyClock`` and due times
those decode to. Loading the key takes the entry out (the clock is then the loader's to
change), and uses it only if the batch still holds those very objects (``is``): any other
write of the key since (a rollback, a batch dropped, a value read again from RocksDB, a write
by any other path) holds other objects, and the record is decoded as it is. Bytes are
immutable and the entry keeps them alive, so the same object always means the same value.

Only a clock that decoding its record gives back exactly is held (``holdable``): times in
whole milliseconds (64 bits), no timers, no expiries, windows that are rows of a start (int)
and an accumulator that is a JSON scalar (``str``, ``int``, a finite ``float``, ``bool``,
``None``): tumbling and hopping windows of most aggregations. A clock holding anything else
(a tuple where JSON gives a list, a session, an accumulator of a pydantic type) is decoded each
time, so a key's time is the same whether it came from here or from its record.

At most ``limit`` entries; past it the oldest quarter are dropped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from itertools import islice

from framework.time.key_clock import KeyClock

__all__ = ["DEFAULT_HELD_CLOCKS", "HeldClock", "HeldClocks", "holdable"]

#: keys whose decoded time is held (about 1 KB each)
DEFAULT_HELD_CLOCKS = 16_384
#: a time record, its due times' stored value, and what they decode to
HeldClock = tuple[bytes, bytes | None, KeyClock, tuple[int, int] | None]
_LOW, _HIGH = -(1 << 63), (1 << 63) - 1
_SCALARS = frozenset({str, int, bool, type(None)})


def holdable(clock: KeyClock) -> bool:
    """Whether decoding ``clock``'s record gives back exactly ``clock``: the same types, not
    only equal values (a tuple, a NaN, an ``int`` subclass are not)."""
    if clock.timers or clock.expiries or not _whole_ms((clock.floor, clock.wall)):
        return False
    if not _whole_ms(clock.times.values()):
        return False
    return all(_scalar_rows(data) for data in clock.windows.values())


def _whole_ms(times: Iterable[object]) -> bool:
    """Whether each of ``times`` is an ``int`` of 64 bits (what a decoded record holds)."""
    for t in times:  # noqa: SIM110 - per record: a loop is faster than all() of a generator
        if type(t) is not int or not _LOW <= t <= _HIGH:
            return False
    return True


def _scalar_rows(data: object) -> bool:
    """Whether ``data`` is a list of ``[start, accumulator]`` lists, each start an ``int``
    and each accumulator a JSON scalar (a finite ``float``)."""
    if type(data) is not list:
        return False
    for row in data:
        if type(row) is not list or len(row) != 2 or type(row[0]) is not int:
            return False
        acc = row[1]
        kind = type(acc)
        if not (kind in _SCALARS or (kind is float and math.isfinite(acc))):
            return False
    return True


class HeldClocks:
    """Key -> ``HeldClock``, for the keys saved last (at most ``limit``; 0: none held)."""

    def __init__(self, limit: int = DEFAULT_HELD_CLOCKS) -> None:
        if limit < 0:
            raise ValueError(f"held clocks are at least 0, got {limit}")
        self.limit = limit
        self._held: dict[bytes, HeldClock] = {}

    def __len__(self) -> int:
        return len(self._held)

    def take(
        self, key: bytes, record: bytes | None, due: bytes | None
    ) -> tuple[KeyClock, tuple[int, int] | None] | None:
        """The clock and due times held for ``key``, taken out, if the batch holds exactly
        ``record`` and ``due`` (the objects written); else ``None`` (decode them)."""
        held = self._held.pop(key, None)
        if held is None or held[0] is not record or held[1] is not due:
            return None
        return held[2], held[3]

    def hold(
        self,
        key: bytes,
        record: bytes,
        due: bytes | None,
        clock: KeyClock,
        loaded_due: tuple[int, int] | None,
    ) -> None:
        """Hold what was just written for ``key`` (``record`` and ``due`` as the batch holds
        them) and what they decode to, if ``holdable``; the caller changes ``clock`` no more."""
        held = self._held
        if not self.limit or not holdable(clock):
            held.pop(key, None)
            return
        held[key] = (record, due, clock, loaded_due)
        if len(held) > self.limit:
            for old in list(islice(held, len(held) - self.limit * 3 // 4)):
                del held[old]

    def clear(self) -> None:
        """Hold nothing."""
        self._held.clear()
