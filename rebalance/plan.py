"""Scale plans: which partitions move when the processor count changes, and what to read.

Growing ``P`` to ``P'`` moves whole partitions, each from its old owner ``bucket(p, B, P)`` to
a new processor ``bucket(p, B, P') >= P``; shrinking moves the leaving processors' partitions
back to the processors they were split from. Every receiving processor gets

- ``s1``: the partitions it will own once caught up, and
- ``s2``: the partitions that may hold records of those partitions' keys: ``s1`` plus their
  ancestors and the deleted partitions whose keys merged into them, each bounded by the
  marker (or drain marker) below which it holds them.

Partitions are planned over every partition the topic ever had (``created``): a deleted
partition has the same owner as its survivor at every processor count ``P <= M``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rebalance.lineage import ReadRange, TopicHistory
from rebalance.linear_hash import bucket, check_layout

__all__ = ["PartitionMove", "ReceiverPlan", "ScalePlan", "plan_scale", "read_set"]


@dataclass(frozen=True, order=True)
class PartitionMove:
    """One partition of one topic changes owner from ``source`` to ``target``."""

    topic: str
    partition: int
    source: int
    target: int


@dataclass(frozen=True)
class ReceiverPlan:
    """What one receiving processor must build before it takes its partitions over."""

    processor: int
    s1: tuple[tuple[str, int], ...]
    s2: tuple[ReadRange, ...]
    sources: tuple[int, ...]


@dataclass(frozen=True)
class ScalePlan:
    """The moves and per-receiver work of changing ``old_processors`` to ``new_processors``."""

    initial_processors: int
    old_processors: int
    new_processors: int
    moves: tuple[PartitionMove, ...]
    receivers: Mapping[int, ReceiverPlan]


def plan_scale(
    initial_processors: int,
    topics: Sequence[TopicHistory],
    old_processors: int,
    new_processors: int,
) -> ScalePlan:
    """Plan a change from ``old_processors`` to ``new_processors`` over the input ``topics``.

    Raises ``ValueError`` naming the numbers and the fix when a topic's initial partition count
    is not ``initial_processors * 2**k``, when either count is outside
    ``initial_processors..partitions``, or when the counts are equal.
    """
    if not topics:
        raise ValueError("an app needs at least one input topic to plan a scale")
    b = initial_processors
    for history in topics:
        for count, label in ((old_processors, "current"), (new_processors, "requested")):
            try:
                check_layout(history.initial_partitions, b, history.partitions, count)
            except ValueError as error:
                raise ValueError(f"topic {history.name!r}, {label} processors: {error}") from None
    if old_processors == new_processors:
        raise ValueError(
            f"the app already runs {old_processors} processors; nothing to change. "
            "Fix: ask for a different processor count."
        )
    moves: list[PartitionMove] = []
    for history in topics:
        for partition in range(history.created):  # deleted partitions move with survivors
            source = bucket(partition, b, old_processors)
            target = bucket(partition, b, new_processors)
            if source != target:
                moves.append(PartitionMove(history.name, partition, source, target))
    by_name = {history.name: history for history in topics}
    receivers: dict[int, ReceiverPlan] = {}
    for target in sorted({move.target for move in moves}):
        mine = [move for move in moves if move.target == target]
        s1 = tuple(sorted((move.topic, move.partition) for move in mine))
        receivers[target] = ReceiverPlan(
            processor=target,
            s1=s1,
            s2=read_set(by_name, s1),
            sources=tuple(sorted({move.source for move in mine})),
        )
    return ScalePlan(b, old_processors, new_processors, tuple(sorted(moves)), receivers)


def read_set(
    topics: Mapping[str, TopicHistory], s1: Sequence[tuple[str, int]]
) -> tuple[ReadRange, ...]:
    """S2 of ``s1``: the partitions plus every partition that may hold their keys' earlier
    records (``TopicHistory.key_history``: ancestors, deleted descendants), each bounded by
    the largest bound any of ``s1`` needs (``None``: a bound not recorded, or an S1 partition,
    read up to the handoff)."""
    ends: dict[tuple[str, int], int | None] = {}
    for topic, partition in s1:
        for read in topics[topic].key_history(partition):
            position = (read.topic, read.partition)
            if position in ends:
                current = ends[position]
                ends[position] = (
                    None
                    if current is None or read.end_offset is None
                    else max(current, read.end_offset)
                )
            else:
                ends[position] = read.end_offset
    for position in s1:
        ends[position] = None
    return tuple(
        ReadRange(topic, partition, end) for (topic, partition), end in sorted(ends.items())
    )
