"""Marks read back from a state (``framework.order``'s marks, kept in progress scopes: the live
``order-mark``, a catch-up's ``<scope>-mark``, a source's snapshot's), each checked as read: one
that is not an integer a mark holds (``NO_FLOOR`` to ``LARGEST``) is refused with an error
naming where it was read and what to do, not handed to the merge (whose own refusal names
neither)."""

from __future__ import annotations

from framework.input_times import ORDER_SCOPE
from framework.order.marks import LARGEST, NO_FLOOR
from rebalance.positions import Position
from statestore import ProcessorDatabase
from statestore.backend import Backend
from statestore.layout import META_STORE, offset_prefix, parse_offset_key
from statestore.meta import prefix_end

__all__ = ["BadStoredMarkError", "order_marks", "stored_marks"]


class BadStoredMarkError(ValueError):
    """A stored mark is not an integer a mark holds (the message names where and the fix)."""


def stored_marks(backend: Backend, scope: str, source: str, fix: str) -> dict[Position, int]:
    """The marks stored in ``backend``'s progress scope ``scope``, per partition;
    ``BadStoredMarkError`` naming ``source`` (what holds them: a processor's state, a
    catch-up, a snapshot by its id), the partition, the scope and ``fix`` when one is not an
    integer from ``NO_FLOOR`` to ``LARGEST``."""
    prefix = offset_prefix(scope)
    marks: dict[Position, int] = {}
    for key, value in backend.scan(META_STORE, prefix, prefix_end(prefix)):
        position = parse_offset_key(key, scope)
        marks[position] = _mark(value, position, scope, source, fix)
    return marks


def order_marks(database: ProcessorDatabase) -> dict[Position, int]:
    """The live marks at the state's offsets (``order-mark``) of ``database``, checked."""
    return stored_marks(
        database.backend,
        ORDER_SCOPE,
        f"the state of processor {database.identity.processor}",
        "stop the processor and move its state directory away: started on none, it restores "
        "its newest snapshot and reads on from there; or rebuild the state "
        "(`splitstate backfill MODULE:APP --replace`).",
    )


def _mark(value: bytes, position: Position, scope: str, source: str, fix: str) -> int:
    """``value`` as a mark, or ``BadStoredMarkError``."""
    try:
        mark = int(value.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        mark = None
    if mark is None or not NO_FLOOR <= mark <= LARGEST:
        topic, partition = position
        raise BadStoredMarkError(
            f"{source}: the mark of {topic}[{partition}] stored in progress scope {scope!r} "
            f"is {value[:40]!r}, not an integer from {NO_FLOOR} to {LARGEST} (ms): the state "
            "holding it is damaged or was written by something other than splitstate, and "
            "ordering the inputs from it would apply records in another order than their "
            f"other readers. Fix: {fix}"
        )
    return mark
