"""The table-table join (``App.table_join``, Kafka Streams' ``KTable.join(KTable)``): a
function called with both tables' newest values of a key when either changes.

A table record of either table is upserted first (``Tables.upsert``); then, if it changed the
table's newest value (with ``history=0`` every record does; with ``history > 0`` one at or
after the key's table time, not an older one inserted among the versions or dropped), each
table join of that table calls its function with the record and both newest values (``None``:
none, or deleted):

- ``inner``: when both tables have a value after the change, or had before it (a deletion of
  one side of a joined pair: its value is ``None``);
- ``left``: on each change of the left table, and on a change of the right one while the
  left has a value;
- ``outer``: on each change of either;

but never when neither table holds a value of the key before or after the change (a
tombstone of a key neither holds). A deletion that does call it passes ``None`` for the
deleted side: the function emits the deletion (docs/concepts/joins.md says how that differs
from Kafka Streams, which forwards one without calling its joiner).

Which records precede which is the canonical order of the app's inputs, so the calls are the
same live, on replay and after a restart. The join keeps no state of its own: a Spark build
of the tables is a build of the join.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from framework.errors import ProcessorStoppedError, describe_error
from framework.joins.interval import JoinType
from framework.records import DeadLetterStage, EncodedOutput, Output, Record, output_items
from framework.tables import DamagedTableError, Tables, TableSpec, Versions
from statestore import StateBatch

__all__ = ["TableJoinFunction", "TableJoinSpec", "TableRecords"]

#: ``function(record, left, right)``: the table record that changed, both newest values
TableJoinFunction = Callable[[Record[Any], Any, Any], Output | list[Output] | None]
#: ``(result, key, origin, function) -> encoded outputs`` (``OutputEncoder.encode``)
Encode = Callable[[Any, bytes, tuple[str, int, int], Callable[..., Any]], list[EncodedOutput]]


@dataclass(frozen=True)
class TableJoinSpec:
    """A join of tables ``left`` and ``right`` (topics declared with ``App.table``), ``how``
    (``inner``, ``left``, ``outer``), calling ``function`` (see the module)."""

    name: str
    left: str
    right: str
    how: JoinType
    function: TableJoinFunction

    def calls(self, changed_left: bool, before: tuple[Any, Any], after: tuple[Any, Any]) -> bool:
        """Whether a change (of the left table: ``changed_left``) calls the function, by
        both values before and after it: never when neither table holds a value before or
        after it (a tombstone of a key neither holds, as Kafka Streams forwards nothing)."""
        if before == (None, None) and after == (None, None):
            return False
        if self.how == "outer":
            return True
        if self.how == "left":
            return changed_left or after[0] is not None
        return None not in after or None not in before


class TableRecords:
    """A table's records as ``RecordProcessor`` applies them: upserted, then its table
    joins called (``encode`` writes their outputs; ``stop_on_error``: a failing function
    raises ``ProcessorStoppedError`` instead of being a dead letter)."""

    def __init__(
        self,
        tables: Mapping[str, TableSpec],
        joins: Mapping[str, TableJoinSpec],
        encode: Encode,
        stop_on_error: bool,
    ) -> None:
        self.tables = Tables(tables)
        self._specs = dict(tables)
        self._joins = {
            topic: [j for j in joins.values() if topic in (j.left, j.right)] for topic in tables
        }
        self._encode = encode
        self._stop = stop_on_error

    def apply(
        self, batch: StateBatch, record: Record[Any], raw: bytes | None
    ) -> tuple[list[EncodedOutput], tuple[DeadLetterStage, str] | None]:
        """Upsert ``record`` of a table (its value decoded) and call its joins: their outputs,
        or why the record is a dead letter (nothing it did is kept then)."""
        joins = self._joins[record.topic]
        if not joins:
            return [], self.tables.upsert(batch, record, raw, stop=self._stop)
        spec = self._specs[record.topic]
        store = batch.store(spec.store)
        saved = store.savepoint(record.key)
        names = {name for join in joins for name in (join.left, join.right)}
        before = self._before(batch, names, record, joins)
        if isinstance(before, str):
            return [], ("decode", before)
        table_time = Versions.decode(store.get(record.key)).time
        refused = self.tables.upsert(batch, record, raw, stop=self._stop)
        if refused is not None:
            return [], refused
        at = spec.time_of(record)  # (None: a tombstone deleting as of the table time)
        if spec.history and table_time is not None and at is not None and at < table_time:
            return [], None  # an older version: the newest value did not change
        after = dict(before)
        after[record.topic] = self._newest(batch, record.topic, record.key)
        outputs: list[EncodedOutput] = []
        where = (record.topic, record.partition, record.offset)
        for join in joins:
            was, now = (
                (before[join.left], before[join.right]),
                (after[join.left], after[join.right]),
            )
            if not join.calls(record.topic == join.left, was, now):
                continue
            try:
                result = join.function(record, *now)
                items = [] if result is None else list(output_items(result, join.name))
                outputs += self._encode(items, record.key, where, join.function)
            except Exception as error:  # any failure of user code is handled by the policy
                store.rollback(record.key, saved)
                if self._stop:
                    raise ProcessorStoppedError(
                        f"table join {join.name!r} failed on {where[0]}[{where[1]}]@{where[2]} "
                        f"(key {record.key!r}): {describe_error(error)}. The record was not "
                        "applied. Fix the function, then restart; or set on_error: "
                        "dead-letter to skip such records.",
                        at=where,
                    ) from error
                return [], ("processor", describe_error(error, with_trace=True))
        return outputs, None

    def _before(
        self, batch: StateBatch, names: set[str], record: Record[Any], joins: list[TableJoinSpec]
    ) -> dict[str, Any] | str:
        """The newest values of tables ``names`` for ``record``'s key before it is applied;
        or, when one cannot be read, the reason of the record's dead letter (stage
        ``decode``; nothing is written)."""
        before: dict[str, Any] = {}
        for name in sorted(names):
            try:
                before[name] = self._newest(batch, name, record.key)
            except DamagedTableError as error:
                if name == record.topic:  # (the record's own table: as upsert refuses it)
                    return f"{error}; the record was not applied (the stored one is kept)"
                return _unreadable(name, record, joins, error)
            except Exception as error:  # a stored value that no longer validates
                return _unreadable(name, record, joins, error)
        return before

    def _newest(self, batch: StateBatch, name: str, key: bytes) -> Any:
        raw = Versions.decode(batch.store(self._specs[name].store).get(key)).latest()
        return self.tables.decode(name, raw)


def _unreadable(
    name: str, record: Record[Any], joins: list[TableJoinSpec], error: Exception
) -> str:
    """The reason of a dead letter for ``record``, whose key's stored value of table ``name``
    (one its joins read) cannot be read: damaged, or no longer its value type."""
    which = ", ".join(repr(join.name) for join in joins if name in (join.left, join.right))
    return (
        f"table join {which}: the stored value of key {record.key!r} in table {name!r} cannot "
        f"be read ({describe_error(error)}): a damaged or foreign state file, or a value type "
        "changed since it was stored. The record was not applied (its table is as before it, "
        "so the join is called when the record is applied again). Fix: restore the processor's "
        "state from a snapshot or rebuild it (`splitstate backfill MODULE:APP --replace`); "
        f"or accept the stored values in table {name!r}'s value type"
    )
