"""The items of several inputs, and the one order a key's items are applied in.

For a key, per input (in config order) its items in lineage order (``(rank, offset)``; ticks
included where the key lives at the tick's position); the key's order is the merge of these
sequences taking each time the head with the least ``(mark, input)``. As marks never decrease
along a key's lineage in one input, that is the stable sort of the key's items by ``(mark,
input, rank, offset)``: ``canonical_order``. Items of different keys are never ordered against
each other.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Generic, NamedTuple, TypeVar

from rebalance.positions import Position

__all__ = ["ORDER_FIELDS", "Item", "canonical_order", "order_key"]

T = TypeVar("T")

#: the fields of an ``Item`` that place it in its key's canonical order, most significant first
#: (``order_key``; a bulk build sorts its columns of these names by them)
ORDER_FIELDS = ("mark", "input", "rank", "offset")


class Item(NamedTuple, Generic[T]):
    """An item of the app's input at ``offset`` of ``position``: a record (``key``), or a tick of
    the app (``key`` ``None``, ``event_time`` its floor), with its ``mark``, its input's index in
    config order, its partition's lineage ``rank`` and what the reader attached (``payload``)."""

    position: Position
    offset: int
    key: bytes | None
    event_time: int | None
    mark: int
    input: int
    rank: int
    payload: T


def order_key(item: Item[T]) -> tuple[int, int, int, int]:
    """Where ``item`` sits in its keys' canonical order: its ``ORDER_FIELDS``, ``(mark, input,
    rank, offset)``."""
    return item.mark, item.input, item.rank, item.offset


def canonical_order(items: Iterable[Item[T]]) -> list[Item[T]]:
    """One key's items (ticks of its partitions included) in the order every reader applies
    them."""
    return sorted(items, key=order_key)
