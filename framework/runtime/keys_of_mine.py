"""Which keys of a rebuilt partition are this processor's (``BatchRunner``'s rebuild below
the group's offsets)."""

from __future__ import annotations

from collections.abc import Callable

from framework.runtime.assignment import Assignment
from rebalance import ancestors, bucket, key_hash
from rebalance.positions import Position

__all__ = ["keys_of_mine"]


def keys_of_mine(
    reading: Assignment, owned_now: set[Position]
) -> Callable[[str, int, bytes | None], bool]:
    """Whether a record's key is this processor's: its current partition (placed with
    today's count) is one this processor owns (``owned_now``, what the control log says, or
    one ``reading`` reads). Rebuilding lost state from a parent partition's start meets
    records of keys split off to a child since; those belong to the child's owner."""
    owned = owned_now | reading.owned
    layouts = {
        name: (entry.initial_partitions, entry.partitions)
        for name, entry in reading.layout.inputs.items()
    }

    def mine(topic: str, partition: int, key: bytes | None) -> bool:
        if key is None or topic not in layouts:
            return True
        initial, count = layouts[topic]
        current = bucket(key_hash(key), initial, count)
        if current == partition or (topic, current) in owned:
            return True
        # only keys a growth moved to a partition split from this one belong elsewhere;
        # a record misplaced by its producer is judged by the placement check, as when
        # it was first processed (a dead letter then, skipped now)
        return partition not in ancestors(current, initial)

    return mine
