"""Partition lineage: which partitions a key's records may sit in, and up to which offset.

When a topic grows from ``M`` to ``M'`` partitions, each new partition ``c`` takes some keys
of its parent ``parent(c, N)``. Records of those keys written before the growth stay in the
parent, up to the marker offset recorded as ``c``'s *threshold*; later ones go to ``c``.
So the history of ``c``'s keys is: each ancestor up to the threshold of the next partition on
the path down to ``c``, then ``c`` itself.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rebalance.linear_hash import ancestors, parent

__all__ = ["ReadRange", "TopicHistory"]


@dataclass(frozen=True, order=True)
class ReadRange:
    """Read ``partition`` of ``topic`` from its start up to ``end_offset`` (exclusive).

    ``end_offset`` is ``None`` when the range is open (read up to the handoff offset) or when
    the bound is not known yet.
    """

    topic: str
    partition: int
    end_offset: int | None = None


@dataclass(frozen=True)
class TopicHistory:
    """An input topic's partition-count history and the thresholds of its growths.

    ``counts`` starts with the initial partition count ``N`` and lists the count after each
    growth (strictly increasing). ``thresholds[c]`` is the offset in ``parent(c)`` of the marker
    written when partition ``c`` was created: records of ``c``'s keys in the parent end there.
    """

    name: str
    counts: tuple[int, ...]
    thresholds: Mapping[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.counts:
            raise ValueError(f"topic {self.name!r}: the partition-count history is empty")
        if self.counts[0] < 1:
            raise ValueError(f"topic {self.name!r}: initial partition count must be at least 1")
        for before, after in zip(self.counts, self.counts[1:], strict=False):
            if after <= before:
                raise ValueError(
                    f"topic {self.name!r}: partition counts must grow, got {before} then {after}"
                )
        for child in self.thresholds:
            if not self.initial_partitions <= child < self.partitions:
                raise ValueError(
                    f"topic {self.name!r}: a threshold for partition {child}, which was not "
                    f"created by a growth (partitions {self.initial_partitions}.."
                    f"{self.partitions - 1} were)"
                )

    @classmethod
    def of(
        cls, name: str, counts: Sequence[int], thresholds: Mapping[int, int] | None = None
    ) -> TopicHistory:
        """Build a history from any sequence of counts."""
        return cls(name, tuple(counts), dict(thresholds or {}))

    @property
    def initial_partitions(self) -> int:
        """``N``: the partition count when the topic was first seen."""
        return self.counts[0]

    @property
    def partitions(self) -> int:
        """``M``: the current partition count."""
        return self.counts[-1]

    def created_at(self, partition: int) -> int:
        """The index in ``counts`` of the step that created ``partition`` (0: initial)."""
        for step, count in enumerate(self.counts):
            if partition < count:
                return step
        raise ValueError(
            f"topic {self.name!r} has {self.partitions} partitions, no partition {partition}"
        )

    def key_history(self, partition: int) -> list[ReadRange]:
        """Where records of ``partition``'s current keys may be, oldest partition first.

        Each ancestor is bounded by the threshold of its child on the path to ``partition``
        (``None`` when that threshold is not recorded yet); ``partition`` itself is open.
        """
        self.created_at(partition)
        chain = [partition, *ancestors(partition, self.initial_partitions)]
        ranges = [ReadRange(self.name, partition)]
        for child, ancestor in itertools.pairwise(chain):
            ranges.append(ReadRange(self.name, ancestor, self.thresholds.get(child)))
        return ranges[::-1]

    def gate(self, partition: int) -> tuple[int, int | None] | None:
        """``(parent, threshold)`` that must be passed before ``partition`` is read, for a
        partition created by a growth (threshold ``None``: not recorded yet, so blocked);
        ``None`` for an initial partition."""
        self.created_at(partition)
        before = parent(partition, self.initial_partitions)
        if before is None:
            return None
        return before, self.thresholds.get(partition)
