"""A key's damaged time record: the dead letter's reason, and loading the time for a record
(a damaged time record fails the record, stage ``decode``)."""

from __future__ import annotations

from framework.time.context import KeyTime
from framework.time.failed import RecordFailedError
from framework.time.keeper import TimeKeeper
from framework.time.key_clock import TIME_STORE, DamagedTimeError
from statestore import StateBatch

__all__ = ["damaged_reason", "load_for_record"]


def load_for_record(keeper: TimeKeeper, batch: StateBatch, key: bytes) -> KeyTime:
    """``key``'s time for a record; a damaged time record fails the record (stage decode)."""
    try:
        return keeper.load(batch, key)
    except DamagedTimeError as damaged:
        why = damaged_reason(key, str(damaged), "The record was not applied")
        raise RecordFailedError("decode", why, damaged) from None


def damaged_reason(key: bytes, why: str, done: str) -> str:
    """The reason of a dead letter for ``key``, whose time record is damaged (``why``)."""
    return (
        f"the time record of key {key!r} in store {TIME_STORE!r} is not in the form splitstate "
        f"writes ({why}): a damaged or foreign state file. {done}; the key's state is kept as "
        "it is. Fix: restore the processor's state from a snapshot or rebuild it (`splitstate "
        "backfill MODULE:APP --replace`); `splitstate state dump --store splitstate.time` "
        "shows the record"
    )
