"""Each input topic's route: how its records are decoded and which function and stores they
go to (``RecordProcessor``'s, prepared once)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import TypeAdapter

from framework.app import Handler

__all__ = ["Route", "decoder"]


def decoder(value_type: type[Any] | None) -> Callable[[bytes | None], Any]:
    """How a record's value is decoded for a function declared with ``value_type``."""
    if value_type is None or value_type is bytes:
        return lambda raw: raw
    if value_type is str:
        return lambda raw: None if raw is None else raw.decode("utf-8")
    adapter: TypeAdapter[Any] = TypeAdapter(value_type)

    def decode(raw: bytes | None) -> Any:
        if raw is None:
            raise ValueError("the record has no value (a tombstone)")
        return adapter.validate_json(raw)

    return decode


class Route:
    """Everything needed to process records of one input topic, prepared once."""

    def __init__(self, topic: str, handler: Handler, stores: Sequence[str]) -> None:
        self.handler = handler
        self.prefix = f"{topic}/".encode()  # (how a marker's or tick's key of it starts)
        self.function = handler.function
        self.decode = decoder(handler.value_type)
        self.stores = tuple(stores)
        self.single_store = self.stores[0] if len(self.stores) == 1 else None
