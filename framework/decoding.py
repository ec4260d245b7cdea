"""How an input record's value is decoded for the type its function (or table) declares."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter

__all__ = ["decoder"]


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
