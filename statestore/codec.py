"""Value codecs: how typed state values become bytes and back.

Plain JSON-able values (dict, list, str, int, float, bool, None) use orjson; pydantic models
(and any type pydantic can validate) use pydantic-core's JSON serializer and validator. Both
write JSON, so stored state stays readable by other tools and by ``splitstate state dump``.
"""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar

import orjson
from pydantic import TypeAdapter

__all__ = ["OWN_STORES", "Codec", "JsonCodec", "RawBytes", "RawCodec", "TypedCodec", "codec_for"]

V = TypeVar("V")


class Codec(Protocol[V]):
    """Turns values of one type into bytes and back."""

    def encode(self, value: V) -> bytes:
        """The stored bytes of ``value``."""
        ...

    def decode(self, data: bytes) -> V:
        """The value stored as ``data``."""
        ...

    def check(self, value: Any) -> V:
        """``value`` as this codec's type, or ``ValidationError``/``TypeError`` when it is not."""
        ...


class JsonCodec:
    """JSON-able Python values, with orjson."""

    def encode(self, value: Any) -> bytes:
        """``value`` as compact JSON."""
        return orjson.dumps(value)

    def decode(self, data: bytes) -> Any:
        """The JSON value in ``data``."""
        return orjson.loads(data)

    def check(self, value: Any) -> Any:
        """Any value is accepted here; one that is not JSON-able fails at commit."""
        return value


class TypedCodec(Generic[V]):
    """Values of a pydantic-validatable type (usually a model), stored as JSON."""

    def __init__(self, value_type: type[V]) -> None:
        self.value_type = value_type
        self._adapter: TypeAdapter[V] = TypeAdapter(value_type)

    def encode(self, value: V) -> bytes:
        """``value`` as JSON, by pydantic-core."""
        return self._adapter.dump_json(value)

    def decode(self, data: bytes) -> V:
        """Validate ``data`` as ``value_type``."""
        return self._adapter.validate_json(data)

    def check(self, value: Any) -> V:
        """``value`` if it already is a ``value_type``, else validated (e.g. dict -> model)."""
        if isinstance(self.value_type, type) and isinstance(value, self.value_type):
            return value
        return self._adapter.validate_python(value)


class RawBytes(bytes):
    """The value type of a store that holds bytes as they are (splitstate's own stores:
    ``StoreSpec(name, RawBytes)``); ``bytes`` stores keep their JSON form."""


#: the prefix of splitstate's own stores (``splitstate.time``, ``splitstate.due``), which hold
#: ``RawBytes``; apps may not declare such names (``framework.app``)
OWN_STORES = "splitstate."


class RawCodec:
    """Bytes stored as they are."""

    def encode(self, value: bytes) -> bytes:
        """``value`` itself."""
        return bytes(value)

    def decode(self, data: bytes) -> bytes:
        """``data`` itself."""
        return bytes(data)

    def check(self, value: Any) -> bytes:
        """``value``, which must be bytes."""
        if not isinstance(value, bytes):
            raise TypeError(f"this store holds bytes, got {type(value).__name__}")
        return value


def codec_for(value_type: type[Any] | None) -> Codec[Any]:
    """The codec for a store's value type (``None`` or ``Any``: plain JSON)."""
    if value_type is RawBytes:
        return RawCodec()
    if value_type is None or value_type is Any:
        return JsonCodec()
    return TypedCodec(value_type)
