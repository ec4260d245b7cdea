"""A record's value as splitstate's own JSON state keeps it (a table's versions, a join's
buffered records): the bytes as received, as text when they are UTF-8, else as
``{"b64": ...}``; ``None`` stays ``None``."""

from __future__ import annotations

import base64
import binascii
from typing import Any

__all__ = ["value_from_json", "value_to_json"]


def value_to_json(raw: bytes | None) -> Any:
    """``raw`` as stored: text, ``None``, or base64 of bytes that are no UTF-8 text."""
    if raw is None:
        return None
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(raw).decode()}


def value_from_json(value: Any) -> bytes | None:
    """The bytes ``value_to_json`` stored as ``value``; ``ValueError`` naming the value when
    it is not that form (neither text, ``None`` nor valid base64)."""
    if value is None:
        return None
    if type(value) is str:
        return value.encode()
    if type(value) is dict and type(value.get("b64")) is str:
        try:
            return base64.b64decode(value["b64"], validate=True)
        except binascii.Error as error:
            raise ValueError(f"a stored value is no base64 ({error}): {value!r}") from None
    raise ValueError(f"a stored value is neither text nor base64: {value!r}")
