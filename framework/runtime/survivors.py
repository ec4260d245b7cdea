"""Where a shrink's survivor takes the keys of its deleted partitions (``TopicHistory``'s
partition gates), for the canonical order's marks (``framework.runtime.ordering``)."""

from __future__ import annotations

from rebalance import TopicHistory

__all__ = ["merged_at"]


def merged_at(
    history: TopicHistory, partition: int, start: int
) -> tuple[int, list[tuple[int, int | None]]] | None:
    """For ``partition`` read from ``start``: the first shrink hold at or after ``start`` where
    it takes deleted partitions' keys, with each of those ``(deleted, drain marker offset + 1)``
    (``None``: not recorded yet); ``None`` when there is none (not a survivor, or read past
    its last hold)."""
    if not 0 <= partition < history.created:
        return None
    for gate in history.partition_gates(partition):
        needs = [(source, needed) for source, needed in gate.needs if source > partition]
        if needs and gate.from_offset >= start:
            return gate.from_offset, needs
    return None
