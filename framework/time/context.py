"""A key's time while one record or tick is applied to it: its loaded ``KeyClock``, the
record's event time, and the outputs its windows emitted."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from framework.records import Output, Record
from framework.time.key_clock import KeyClock

__all__ = ["KeyTime"]


@dataclass
class KeyTime:
    """One key's time, loaded in a batch (``framework.time.keeper``)."""

    key: bytes
    clock: KeyClock
    #: the stored due times as loaded (to write them only when they change)
    loaded_due: tuple[int, int] | None
    #: the record being applied (``None`` for a tick) and its event time
    record: Record[Any] | None = None
    event_time: int | None = None
    #: outputs of ``current`` windows and late callbacks, emitted after the record's own
    outputs: list[Output] = field(default_factory=list)
    #: timers fired for the key in this record or tick (``keeper.MAX_FIRINGS``)
    fired: int = 0
    #: applied at a tick: the key's ``wall`` is the processing time now (at a record, it is
    #: the last tick's applied to the key, which may be long ago)
    ticked: bool = False
