"""A key's time while one record or tick is applied to it: its loaded ``KeyClock``, the
record's event time, and the outputs its windows emitted."""

from __future__ import annotations

from typing import Any

from framework.records import Output, Record
from framework.time.key_clock import KeyClock

__all__ = ["KeyTime"]


class KeyTime:
    """One key's time, loaded in a batch (``framework.time.keeper``): its ``clock``; the
    stored due times as loaded, ``loaded_due`` (to write them only when they change); the
    record being applied (``record``: ``None`` for a tick) and its ``event_time``;
    ``outputs`` of ``current`` windows and late callbacks, emitted after the record's own;
    ``fired``: timers fired for the key in this record or tick (``keeper.MAX_FIRINGS``);
    ``ticked``: applied at a tick; ``dead``: the parts of a timer function's work it made
    dead letters of their own (``KeyTimers.dead_letter``: value and reason)."""

    __slots__ = (
        "clock",
        "dead",
        "event_time",
        "fired",
        "key",
        "loaded_due",
        "outputs",
        "record",
        "ticked",
    )

    def __init__(
        self,
        key: bytes,
        clock: KeyClock,
        loaded_due: tuple[int, int] | None,
        record: Record[Any] | None = None,
        event_time: int | None = None,
    ) -> None:
        self.key = key
        self.clock = clock
        self.loaded_due = loaded_due
        self.record = record
        self.event_time = event_time
        self.outputs: list[Output] = []
        self.fired = 0
        self.dead: list[tuple[bytes | None, str]] = []
        #: applied at a tick: the key's ``wall`` is the processing time now (at a record, it
        #: is the last tick's applied to the key, which may be long ago)
        self.ticked = False
