"""One order for several inputs: a key's items from several input topics, applied in one
canonical order that every reader (live, restart, catch-up, snapshot + tail, Spark) reproduces.

Pure: no I/O, no clock. ``marks`` (a partition's mark as its items are read), ``canonical``
(the order: a stable sort of a key's items by ``(mark, input, rank, offset)``), ``merge`` (the
live ``MergeBuffer`` that releases items only when no unread item can precede them).
"""

from framework.order.canonical import ORDER_FIELDS, Item, canonical_order, order_key
from framework.order.marks import ENDED, NO_FLOOR, PartitionMark, running_marks
from framework.order.merge import Blocker, Blocking, MergeBuffer

__all__ = [
    "ENDED",
    "NO_FLOOR",
    "ORDER_FIELDS",
    "Blocker",
    "Blocking",
    "Item",
    "MergeBuffer",
    "PartitionMark",
    "canonical_order",
    "order_key",
    "running_marks",
]
