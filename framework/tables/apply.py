"""Applying an app's table records to their keys' versions, and the ``KeyTable`` views its
functions get (``RecordProcessor`` does both, so every path that applies records agrees)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from framework.decoding import decoder
from framework.errors import ProcessorStoppedError, describe_error
from framework.records import DeadLetterStage, Record
from framework.tables.spec import TableSpec
from framework.tables.versions import DamagedTableError, Versions
from framework.tables.view import KeyTable
from framework.time.specs import NoEventTimeError
from statestore import StateBatch

__all__ = ["Tables", "UnreadableRecordError", "damaged_reason", "is_tombstone"]


class UnreadableRecordError(ValueError):
    """A record of a function that reads tables has no event time, or a table's stored
    data of its key is damaged: its dead letter (stage ``decode``, as in an app that keeps
    time), the function not called."""


def damaged_reason(table: str, error: DamagedTableError) -> str:
    """The dead letter's reason (stage ``decode``) of a record not applied because its key's
    stored versions of ``table`` are damaged."""
    return (
        f"table {table!r}: {error}; the record was not applied (the stored one is kept: "
        "repair or delete it)"
    )


def is_tombstone(raw: bytes | None) -> bool:
    """Whether a table record's value deletes the key's value: none, or empty."""
    return not raw


class Tables:
    """An app's tables (``App.tables``): their records upserted, their views made."""

    def __init__(self, tables: Mapping[str, TableSpec]) -> None:
        self._specs = dict(tables)
        self._decoders = {topic: decoder(spec.value_type) for topic, spec in tables.items()}

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def decode(self, topic: str, raw: bytes | None) -> Any:
        """A record's value of table ``topic``, validated as its value type (``None``: a
        tombstone); what the decoder raises (``ValidationError``, ``ValueError``,
        ``UnicodeDecodeError``) passes through: the record is a dead letter."""
        return None if is_tombstone(raw) else self._decoders[topic](raw)

    def upsert(
        self, batch: StateBatch, record: Record[Any], raw: bytes | None, *, stop: bool = False
    ) -> tuple[DeadLetterStage, str] | None:
        """Apply ``record`` of a table (its value decoded by ``decode``; ``raw`` as
        received) to its key's versions; or, writing nothing, say why it cannot be (the
        record's dead letter: its stage and reason): it has no event time (stage
        ``decode``), the table's ``event_time`` function failed (stage ``processor``, as a
        processor's does; with ``stop``, ``ProcessorStoppedError`` instead), or the key's
        stored versions are damaged (stage ``decode``)."""
        spec = self._specs[record.topic]
        try:
            at = spec.time_of(record)
        except NoEventTimeError as error:
            return "decode", f"no event time: {error}"
        except Exception as error:  # the app's event time function failed: on_error's
            where = (record.topic, record.partition, record.offset)
            reason = f"the event time function failed: {describe_error(error, with_trace=True)}"
            if stop:
                raise ProcessorStoppedError(
                    f"{reason} at {where[0]}[{where[1]}]@{where[2]}. Fix the function, then "
                    "restart; or set on_error: dead-letter to skip such records.",
                    at=where,
                ) from error
            return "processor", reason
        store = batch.store(spec.store)
        key = record.key
        try:
            versions = Versions.decode(store.get(key))
        except DamagedTableError as error:
            return "decode", damaged_reason(spec.topic, error)
        versions.upsert(at, None if is_tombstone(raw) else raw, spec.history)
        encoded = versions.encode()
        if encoded is None:
            store.delete(key)
        else:
            store.set(key, encoded)
        return None

    def views(
        self,
        batch: StateBatch,
        record: Record[Any],
        names: Sequence[str],
        states: Mapping[str, Any],
        event_time: Callable[[Record[Any]], int],
    ) -> Any:
        """What a function gets for ``record`` in an app that keeps no time (``state``,
        with ``states`` its other views), its tables read as of the record's event time
        (``event_time``: its topic's rule); both are checked before the function runs:
        ``UnreadableRecordError`` when it has none or a table's data of its key is damaged
        (what an event time function raises passes through: a failure of the app's code)."""
        try:
            at = event_time(record)
            return self.state(batch, record.key, names, states, lambda: at)
        except NoEventTimeError as error:
            raise UnreadableRecordError(f"no event time: {error}") from None
        except DamagedTableError as error:
            raise UnreadableRecordError(str(error)) from None

    def state(
        self,
        batch: StateBatch,
        key: bytes,
        names: Sequence[str],
        states: Mapping[str, Any],
        record_time: Callable[[], int | None],
    ) -> Any:
        """What a function with stores ``names`` gets for ``key``: ``states`` (its other
        views, by name) with each table's ``KeyTable``; one view when it has one store, else
        a dict of them by name."""
        views = {
            name: states[name] if name in states else self.view(batch, name, key, record_time)
            for name in names
        }  # (a table's damaged versions: DamagedTableError, see ``view``)
        return next(iter(views.values())) if len(views) == 1 else views

    def view(
        self, batch: StateBatch, name: str, key: bytes, record_time: Callable[[], int | None]
    ) -> KeyTable[Any]:
        """Table ``name``'s ``KeyTable`` of ``key`` for a function applied to a record whose
        event time ``record_time`` gives; ``DamagedTableError`` when the key's stored
        versions are damaged (``damaged_reason``: the record's dead letter, stage
        ``decode``)."""
        spec = self._specs[name]
        raw = batch.store(spec.store).get(key)
        try:  # (before a function runs)
            versions = Versions.decode(raw)
        except DamagedTableError as error:
            raise DamagedTableError(damaged_reason(name, error)) from None
        return KeyTable(spec, key, raw, self._decoders[name], record_time, versions=versions)
