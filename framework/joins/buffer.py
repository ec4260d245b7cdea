"""One key's buffered records of an interval join, as stored in the key's range (store
``splitstate.join.<name>``): each side's records not yet expired, in the order they were
applied (the canonical order), with whether each was matched yet.

Stored as JSON: ``{"l": [ENTRY, ...], "r": [ENTRY, ...]}`` where ``ENTRY`` is ``[time,
partition, offset, timestamp, value, matched]``: the record's event time, where it was read,
its Kafka timestamp (``null``: none), its value as received (text, ``null`` for none, or
``{"b64": ...}`` for bytes that are no UTF-8 text) and ``1`` once it matched a record of the
other side (else ``0``). A record's headers are not kept. Nothing here reads a clock or
another key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import orjson

from framework.stored_values import value_from_json, value_to_json

__all__ = ["Buffered", "DamagedJoinError", "JoinBuffer", "Side"]

#: a side of an interval join: ``"l"`` (left) or ``"r"`` (right)
Side = Literal["l", "r"]


class DamagedJoinError(ValueError):
    """A key's stored join buffer is not in the form ``JoinBuffer.encode`` writes."""


@dataclass(slots=True)
class Buffered:
    """One buffered record of a side."""

    time: int
    partition: int
    offset: int
    timestamp: int | None
    raw: bytes | None
    matched: bool = False

    def encode(self) -> list[Any]:
        """The stored form (see the module)."""
        return [
            self.time,
            self.partition,
            self.offset,
            self.timestamp,
            value_to_json(self.raw),
            int(self.matched),
        ]

    @classmethod
    def decode(cls, entry: Any) -> Buffered:
        """A record from its stored form (``DamagedJoinError``: not that form)."""
        if type(entry) is not list or len(entry) != 6:
            raise DamagedJoinError(f"a buffered record is not a list of six fields: {entry!r}")
        time, partition, offset, timestamp, value, matched = entry
        if not (_int(time) and _int(partition) and _int(offset)) or matched not in (0, 1):
            raise DamagedJoinError(f"a buffered record's fields are not numbers: {entry!r}")
        if timestamp is not None and not _int(timestamp):
            raise DamagedJoinError(f"a buffered record's timestamp is no number: {entry!r}")
        return cls(time, partition, offset, timestamp, _raw(value), bool(matched))


class JoinBuffer:
    """One key's buffered records of both sides (see the module)."""

    __slots__ = ("sides",)

    def __init__(self, left: list[Buffered] | None = None, right: list[Buffered] | None = None):
        #: each side's records, in the order applied
        self.sides: dict[Side, list[Buffered]] = {"l": left or [], "r": right or []}

    @classmethod
    def decode(cls, data: bytes | None) -> JoinBuffer:
        """The buffer stored as ``data`` (``None``: empty); ``DamagedJoinError`` when it is
        not what ``encode`` writes."""
        if data is None:
            return cls()
        try:
            stored = orjson.loads(data)
        except orjson.JSONDecodeError as error:
            raise DamagedJoinError(f"a join buffer is no JSON: {error}") from None
        if type(stored) is not dict or not set(stored) <= {"l", "r"}:
            raise DamagedJoinError(f"a join buffer is not an object of 'l' and 'r': {stored!r}")
        sides = [stored.get(side, []) for side in ("l", "r")]
        if any(type(entries) is not list for entries in sides):
            raise DamagedJoinError("a join buffer's sides are not lists")
        left, right = ([Buffered.decode(entry) for entry in entries] for entries in sides)
        return cls(left, right)

    def encode(self) -> bytes | None:
        """The stored form (``None``: nothing buffered, the key's value is deleted)."""
        stored = {side: [b.encode() for b in items] for side, items in self.sides.items() if items}
        return orjson.dumps(stored) if stored else None


def _int(value: Any) -> bool:
    return type(value) is int


def _raw(value: Any) -> bytes | None:
    """The value as received, from its stored form (``DamagedJoinError``: not that form)."""
    try:
        return value_from_json(value)
    except ValueError as error:
        raise DamagedJoinError(f"a buffered value is damaged: {error}") from None
