"""How far a receiver's catch-up read its partitions: for their gates, and for its handoffs'
completion (``framework.runtime.catchup``)."""

from __future__ import annotations

import sys
from collections.abc import Mapping

from rebalance import TopicHistory
from rebalance.control import Handoff
from rebalance.plan import read_set
from rebalance.positions import Position

__all__ = ["ancestors_read", "read_for_gates"]


def read_for_gates(
    history: TopicHistory,
    topic: str,
    positions: Mapping[Position, int],
    ends: Mapping[Position, int | None],
) -> dict[int, int]:
    """How far each partition of ``topic`` (``history``) is read (``positions``), for its
    gates. One not read here, or read to its end (``ends``: an ancestor's bound, a released
    partition's F) is read for good: it holds no more of the gained keys' records, and its
    owner held the records after a gate it did not reach (so none of them is below F)."""
    read = {}
    for p in range(history.created):
        at, end = positions.get((topic, p)), ends.get((topic, p))
        read[p] = sys.maxsize if at is None or (end is not None and at >= end) else at
    return read


def ancestors_read(
    topics: Mapping[str, TopicHistory], positions: Mapping[Position, int], handoff: Handoff
) -> bool:
    """Whether every ancestor of ``handoff``'s partitions was read (``positions``) to the
    threshold below which it holds records of their keys, also an ancestor that is another
    handoff's partition (read to T1, not to a bound): completed first, the handoff's keys
    would miss those records, and a restarted catch-up no longer gains them."""
    own = set(handoff.partitions)
    return all(
        positions[(read.topic, read.partition)] >= read.end_offset
        for read in read_set(topics, sorted(own))
        if read.end_offset is not None and (read.topic, read.partition) not in own
    )
