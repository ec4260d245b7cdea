"""What an app declares for a table: its input topic, value type, history and event time
(``App.table``), and the store its versions live in."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from framework.records import Record
from framework.time.specs import EventTime, event_time_of

__all__ = ["TABLE_PREFIX", "TableSpec", "TableUpsert", "table_store"]

#: a table's versions live in store ``splitstate.table.<topic>`` (one of splitstate's own)
TABLE_PREFIX = "splitstate.table."


def table_store(topic: str) -> str:
    """The name of the store holding table ``topic``'s versions."""
    return TABLE_PREFIX + topic


@dataclass(frozen=True)
class TableSpec:
    """Input ``topic`` declared a table: its records upsert the key's value (validated as
    ``value_type``, as a processor's records are), its tombstones (no value, or an empty one)
    delete it. ``history``: how long (ms, by the key's table time) older versions are kept for
    as-of reads (0: only the newest). ``event_time``: where a record's time comes from, as for
    a processor (``None``: the Kafka timestamp). A tombstone has no value: with the Kafka
    timestamp it keeps its own; with a field or a function it has no time of its own
    (``time_of`` gives ``None``): it deletes the key as of the key's table time and adds no
    time to its partition's mark, as its Kafka timestamp is on another clock than the values'
    times (docs/concepts/tables.md)."""

    topic: str
    value_type: type[Any] | None
    history: int = 0
    event_time: EventTime = None
    _rule: Callable[[Record[Any]], int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_rule", event_time_of(self.event_time))

    @property
    def store(self) -> str:
        """The store of the table's versions."""
        return table_store(self.topic)

    def time_of(self, record: Record[Any]) -> int | None:
        """The event time of a record of the table: a tombstone's is its Kafka timestamp
        when that is the table's event time, else ``None`` (it has no time of its own: see
        the class); ``NoEventTimeError`` when a record that should have one has none."""
        if record.value is None and self.event_time is not None:
            return None
        return self._rule(record)


class TableUpsert:
    """The handler function ``App.table`` registers for a table's topic: a marker, never
    called (``RecordProcessor`` upserts the table's records instead)."""

    __slots__ = ("__name__", "spec")

    def __init__(self, spec: TableSpec) -> None:
        self.spec = spec
        self.__name__ = f"table {spec.topic!r}"

    def __call__(self, record: Record[Any], state: Any) -> None:
        """Never called: a table's records are upserted, no function runs for them."""
        raise TypeError(f"{self.__name__} has no processor function; its records upsert it")
