"""Gates: what must be read before a record, so each key's records are read in the order
produced across growths and shrinks (pure; ``TopicHistory``'s gate methods).

A key enters a partition ``p`` at a step in two ways: a growth creates ``p`` (every key of the
new life came from ``parent(p)``, up to its marker there), or a shrink merges a deleted ``d``
into ``p`` (the key's records in ``d`` end at ``d``'s drain marker). A record of the key in
``p`` waits until the source is *reached* up to that boundary.

*Reached* (``reached``): a partition ``a`` is read up to ``needed`` (its position, the next
offset to read or the group's committed offset, is ``>= needed``) and every partition gate
of ``a`` that starts below ``needed`` is open, recursively. The recursion matters: a reader
that holds only some keys of a survivor (per key) passes the survivor's markers while other
keys are held, so a position alone does not say the keys that moved on were read in order.
Gates point only to boundaries of earlier steps (or the same growth's parents), so the
recursion ends and a reader that holds partitions at their gates never deadlocks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from rebalance.history_checks import survivors
from rebalance.linear_hash import bucket, parent
from rebalance.steps import Grow, PartitionGate

if TYPE_CHECKING:
    from rebalance.lineage import TopicHistory

__all__ = ["entry_gate", "partition_gates", "reached", "read_limit"]

Need = tuple[int, int | None]


def _after(offset: int | None) -> int | None:
    return None if offset is None else offset + 1


def entry_gate(history: TopicHistory, h: int, partition: int, offset: int) -> Need | None:
    """See ``TopicHistory.entry_gate``."""
    n, counts = history.initial_partitions, history.counts
    i = history.step_at(partition, offset)
    if bucket(h, n, counts[i]) != partition:
        return None  # late
    entered = i
    while entered > 0 and bucket(h, n, counts[entered - 1]) == partition:
        entered -= 1
    if entered == 0:
        return None
    step = history.steps[entered - 1]
    if isinstance(step, Grow):
        source = parent(partition, n)
        assert source is not None  # a key enters by a growth only into a grown partition
        return source, _after(step.markers.get(partition))
    came_from = bucket(h, n, counts[entered - 1])
    return came_from, _after(step.drains.get(came_from))


def partition_gates(history: TopicHistory, partition: int) -> tuple[PartitionGate, ...]:
    """See ``TopicHistory.partition_gates``."""
    gates: list[PartitionGate] = []
    n = history.initial_partitions
    for i, step in enumerate(history.steps, start=1):
        before = history.counts[i - 1]
        needs: tuple[Need, ...]
        if isinstance(step, Grow):
            if before <= partition < step.count:
                source = parent(partition, n)
                assert source is not None
                needs = ((source, _after(step.markers.get(partition))),)
                gates.append(PartitionGate(step.starts[partition], needs, i))
        elif partition in step.holds:
            merged = survivors(n, before, step.count)[partition]
            needs = tuple((d, _after(step.drains.get(d))) for d in merged)
            gates.append(PartitionGate(step.holds[partition], needs, i))
    return tuple(gates)


def reached(
    history: TopicHistory,
    partition: int,
    needed: int | None,
    positions: Mapping[int, int],
    _known: dict[tuple[int, int], bool] | None = None,
) -> bool:
    """See ``TopicHistory.reached``."""
    if needed is None or positions.get(partition, 0) < needed:
        return False
    known = {} if _known is None else _known
    if (partition, needed) not in known:
        known[(partition, needed)] = all(
            reached(history, source, need, positions, known)
            for gate in history.partition_gates(partition)
            if gate.from_offset < needed
            for source, need in gate.needs
        )
    return known[(partition, needed)]


def read_limit(history: TopicHistory, partition: int, positions: Mapping[int, int]) -> int | None:
    """See ``TopicHistory.read_limit``."""
    known: dict[tuple[int, int], bool] = {}
    limit: int | None = None
    for gate in history.partition_gates(partition):
        if limit is not None and gate.from_offset >= limit:
            continue
        if not all(reached(history, a, need, positions, known) for a, need in gate.needs):
            limit = gate.from_offset
    return limit
