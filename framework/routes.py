"""Each input topic's route: how its records are decoded and which function and stores they
go to (``RecordProcessor``'s, prepared once)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from framework.app import Handler
from framework.decoding import decoder
from framework.records import Record
from framework.tables import TableSpec, TableUpsert
from framework.time.specs import event_time_of

__all__ = ["Route", "decoder"]


class Route:
    """Everything needed to process records of one input topic, prepared once.

    ``table``: the topic's table (its records upsert it; no function runs), else ``None``.
    ``names``: the stores the function gets, in order; ``stores``: those of them that are
    key-value stores (saved and rolled back around the function), ``tables``: those that
    are tables (``KeyTable``, read only)."""

    def __init__(
        self, topic: str, handler: Handler, stores: Sequence[str], tables: Collection[str] = ()
    ) -> None:
        self.handler = handler
        self.prefix = f"{topic}/".encode()  # (how a marker's or tick's key of it starts)
        self.function = handler.function
        self.decode = decoder(handler.value_type)
        self.table: TableSpec | None = (
            handler.function.spec if isinstance(handler.function, TableUpsert) else None
        )
        self.names = tuple(stores)
        self.stores = tuple(name for name in stores if name not in tables)
        self.tables = tuple(name for name in stores if name in tables)
        self.single_store = self.stores[0] if len(self.stores) == 1 and not self.tables else None
        self._event_time = event_time_of(handler.event_time)

    def event_time(self, record: Record[Any]) -> int:
        """``record``'s event time by the topic's rule (``NoEventTimeError``: it has none)."""
        return self._event_time(record)
