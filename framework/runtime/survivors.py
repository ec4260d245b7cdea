"""Where a shrink's survivor takes the keys of its deleted partitions (``TopicHistory``'s
partition gates), and its link to them in the canonical order's merge
(``framework.runtime.ordering``, ``framework.order.survivor_links``)."""

from __future__ import annotations

from collections.abc import Mapping, MutableSet
from collections.abc import Set as AbstractSet
from typing import TypeVar

from framework.coordination.registry import TopicEntry
from framework.order import NO_FLOOR, MergeBuffer
from rebalance import TopicHistory
from rebalance.positions import Position

__all__ = ["close_drained", "link_survivors", "merged_at", "open_deleted"]

T = TypeVar("T")


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


def link_survivors(
    buffer: MergeBuffer[T],
    inputs: Mapping[str, TopicEntry],
    read: Mapping[Position, int],
    offsets: Mapping[Position, int],
    marks: Mapping[Position, int],
) -> None:
    """Link each partition ``buffer`` reads (``read``: each with its next offset) that is a
    shrink's survivor not read past its hold to the deleted partitions merging into it
    (``MergeBuffer.merging``): those read here give their final marks when closed; one not
    read here whose state offset (``offsets``) is past its drain marker gives its stored
    mark there (``marks``); another's is not known here (not published). From its hold on
    its items have the lineage rank there (``TopicHistory.rank``)."""
    for position in sorted(read):
        topic, partition = position
        entry = inputs.get(topic)
        found = None if entry is None else merged_at(entry.history, partition, read[position])
        if entry is None or found is None:
            continue
        hold, needs = found
        here: list[Position] = []
        floor = NO_FLOOR
        for deleted, needed in needs:
            source = (topic, deleted)
            stored, mark = offsets.get(source), marks.get(source)
            if source in read:
                here.append(source)
            elif needed is not None and stored is not None and stored >= needed:
                floor = max(floor, NO_FLOOR if mark is None else mark)
        rank = entry.history.rank(partition, hold)  # (the shrink's step: above theirs)
        buffer.merging(position, hold, here, floor, rank)


def open_deleted(
    inputs: Mapping[str, TopicEntry], read: Mapping[Position, int], closed: AbstractSet[Position]
) -> set[Position]:
    """The partitions ``read`` that a shrink deleted (``inputs``: the registry now) and are
    not ``closed``."""
    return {
        (topic, partition)
        for topic, partition in read
        if topic in inputs
        and partition >= inputs[topic].partitions
        and (topic, partition) not in closed
    }


def close_drained(
    buffer: MergeBuffer[T],
    inputs: Mapping[str, TopicEntry],
    read: Mapping[Position, int],
    closed: MutableSet[Position],
) -> None:
    """Close in ``buffer`` each deleted partition read (``read``: with its next offset) past
    its drain marker (as the registry has it now) and not ``closed`` yet (added to it): no
    record of a key comes from it any more, and its last mark must not hold the other inputs
    back for ever (its keys' later records come from its survivor, which takes its final
    mark)."""
    for position, next_offset in read.items():
        topic, partition = position
        entry = inputs.get(topic)
        if entry is None or partition < entry.partitions or position in closed:
            continue
        end = entry.history.key_history(partition)[-1].end_offset
        if end is not None and next_offset >= end:
            buffer.close(position)
            closed.add(position)
