"""Partition lineage: where a key lives at each position of an input topic, and what order
its records are read in, through growths and shrinks (pure).

A topic's history is its initial count ``N`` and its *steps* (``rebalance.steps``): each
``Grow`` splits partitions off their parents, each ``Shrink`` deletes the highest partitions,
whose keys merge back into their survivors. ``counts[i]`` is the count step ``i`` brings
(step 0: ``N``). Kafka never removes a partition: ``created = max(counts)`` partitions are
read, ``partitions = counts[-1]`` place keys, and ``deleted() = range(partitions, created)``.

Each step puts a boundary in each partition it touches (``boundaries(p)``); ``step_at(p, o)``
is the step in force at offset ``o`` of ``p`` and ``home_at(h, p, o)`` the partition that step
places key hash ``h`` in. A record whose ``home_at`` is not its partition is *late*.
``entry_gate`` (per key) and ``partition_gates``/``read_limit`` (per partition) say what must
be read first so each key's records are read in the order produced (a need is met when
``reached``: read up to it through its own gates, ``rebalance.history_gates``);
``rank(p, o)`` orders a key's records across partitions as ``(rank, offset)``.

Building the next history (each returns a new, checked ``TopicHistory``):

- ``grown(count, starts)``: a ``Grow`` to ``count`` (markers not recorded yet);
- ``shrunk(count, holds)``: a ``Shrink`` to ``count`` (drains not recorded yet);
- ``with_markers(markers)`` / ``with_drains(drains)``: record the last step's markers /
  drain markers (merged with those recorded before);
- ``survivors(count)``: for a shrink to ``count``, each survivor -> its deleted partitions.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from rebalance import history_gates
from rebalance.history_checks import check_history, survivors
from rebalance.key_lineage import ReadRange, key_history
from rebalance.linear_hash import bucket, parent
from rebalance.steps import Boundary, Grow, PartitionGate, Shrink, Step, survivor

__all__ = ["ReadRange", "TopicHistory"]


@dataclass(frozen=True)
class _Index:
    """One partition's recorded boundaries sorted by offset, with the step in force from each."""

    boundaries: tuple[Boundary, ...]
    offsets: tuple[int, ...]
    in_force: tuple[int, ...]


@dataclass(frozen=True)
class TopicHistory:
    """An input topic's partition-count history: ``counts`` (``counts[0] = N``, each later
    count ``>= N`` and different from the one before) and one step per later count
    (``steps[i - 1].count == counts[i]``). ``ValueError`` naming the field when they do not
    fit (a history read from a record is untrusted)."""

    name: str
    counts: tuple[int, ...]
    steps: tuple[Step, ...] = field(default=())

    def __post_init__(self) -> None:
        check_history(self.name, self.counts, self.steps)
        self._check_order()

    @classmethod
    def of(
        cls, name: str, counts: Sequence[int], thresholds: Mapping[int, int] | None = None
    ) -> TopicHistory:
        """A history of growths only: ``counts`` strictly increasing, ``thresholds[c]`` the
        marker offset of grown ``c`` in its parent; every life starts at offset 0."""
        counts = tuple(counts)
        thresholds = dict(thresholds or {})
        for before, after in itertools.pairwise(counts):
            if after <= before:
                raise ValueError(
                    f"topic {name!r}: partition counts must grow, got {before} then {after} "
                    "(a history with shrinks needs its steps: TopicHistory(name, counts, steps))"
                )
        if counts:
            for child in thresholds:
                if not counts[0] <= child < counts[-1]:
                    raise ValueError(
                        f"topic {name!r}: a threshold for partition {child}, which was not "
                        f"created by a growth (partitions {counts[0]}..{counts[-1] - 1} were)"
                    )
        steps = tuple(
            Grow(
                after,
                {c: 0 for c in range(before, after)},
                {c: thresholds[c] for c in range(before, after) if c in thresholds},
            )
            for before, after in itertools.pairwise(counts)
        )
        return cls(name, counts, steps)

    # -- the counts

    @property
    def initial_partitions(self) -> int:
        """``N``: the partition count when the topic was first seen."""
        return self.counts[0]

    @property
    def partitions(self) -> int:
        """``M``: the current partition count (where producers place keys)."""
        return self.counts[-1]

    @property
    def created(self) -> int:
        """``max(counts)``: the partitions Kafka has and the app reads (deleted ones too)."""
        return max(self.counts)

    def deleted(self) -> range:
        """The partitions deleted now: Kafka has them, no key is placed there."""
        return range(self.partitions, self.created)

    @property
    def last_step(self) -> Step | None:
        """The latest step (``None``: the topic never changed its count)."""
        return self.steps[-1] if self.steps else None

    @cached_property
    def thresholds(self) -> Mapping[int, int]:
        """Each grown partition -> its marker offset in its parent, from the last growth that
        grew it (absent while not recorded). For display and growth-only callers."""
        found: dict[int, int] = {}
        for step in self.steps:
            if isinstance(step, Grow):
                for child in step.starts:
                    found.pop(child, None)
                found.update(step.markers)
        return dict(sorted(found.items()))

    def created_at(self, partition: int) -> int:
        """The index in ``counts`` of the step that first created ``partition`` (0: initial)."""
        self._check_partition(partition)
        return next(i for i, count in enumerate(self.counts) if partition < count)

    def survivor(self, deleted: int, count: int) -> int:
        """The partition that takes ``deleted``'s keys when the count drops to ``count``."""
        return survivor(deleted, self.initial_partitions, count)

    def survivors(self, count: int) -> dict[int, tuple[int, ...]]:
        """For a shrink from ``partitions`` to ``count``: each survivor -> the partitions
        deleted into it."""
        return survivors(self.initial_partitions, self.partitions, count)

    # -- building the next history

    def grown(self, count: int, starts: Mapping[int, int]) -> TopicHistory:
        """This history followed by a growth to ``count`` (``starts``: each grown partition's
        first offset of its new life), its markers not recorded yet."""
        return TopicHistory(self.name, (*self.counts, count), (*self.steps, Grow(count, starts)))

    def shrunk(self, count: int, holds: Mapping[int, int]) -> TopicHistory:
        """This history followed by a shrink to ``count`` (``holds``: each survivor's end
        offset measured before the count was recorded), its drains not recorded yet."""
        return TopicHistory(self.name, (*self.counts, count), (*self.steps, Shrink(count, holds)))

    def with_markers(self, markers: Mapping[int, int]) -> TopicHistory:
        """The last step, a growth, with ``markers`` (child -> marker offset) recorded too."""
        step = self.last_step
        if not isinstance(step, Grow):
            raise ValueError(
                f"topic {self.name!r}: markers {dict(markers)} given, but the last step is "
                f"{'none' if step is None else 'a shrink'}, not a growth"
            )
        updated = Grow(step.count, step.starts, {**step.markers, **markers})
        return TopicHistory(self.name, self.counts, (*self.steps[:-1], updated))

    def with_drains(self, drains: Mapping[int, int]) -> TopicHistory:
        """The last step, a shrink, with ``drains`` (deleted -> drain marker offset) too."""
        step = self.last_step
        if not isinstance(step, Shrink):
            raise ValueError(
                f"topic {self.name!r}: drain markers {dict(drains)} given, but the last step "
                f"is {'none' if step is None else 'a growth'}, not a shrink"
            )
        updated = Shrink(step.count, step.holds, {**step.drains, **drains})
        return TopicHistory(self.name, self.counts, (*self.steps[:-1], updated))

    # -- boundaries and homes

    def boundaries(self, partition: int) -> tuple[Boundary, ...]:
        """The recorded boundaries of ``partition``, by offset (then step)."""
        self._check_partition(partition)
        return self._index.get(partition, _EMPTY).boundaries

    def step_at(self, partition: int, offset: int) -> int:
        """The step in force at ``offset`` of ``partition``: the largest step index whose
        recorded boundary there is ``<= offset`` (0: none)."""
        self._check_partition(partition)
        if offset < 0:
            raise ValueError(f"topic {self.name!r}: offset {offset} is negative")
        index = self._index.get(partition)
        if index is None:
            return 0
        at = bisect.bisect_right(index.offsets, offset) - 1
        return index.in_force[at] if at >= 0 else 0

    def rank(self, partition: int, offset: int) -> int:
        """The lineage rank of a record: a key's records are in produced order by
        ``(rank, offset)`` (``step_at``)."""
        return self.step_at(partition, offset)

    def home_at(self, h: int, partition: int, offset: int) -> int:
        """The partition the step in force at ``(partition, offset)`` places key hash ``h``
        in; a keyed record there is late when this is not ``partition``."""
        return bucket(h, self.initial_partitions, self.counts[self.step_at(partition, offset)])

    # -- gates

    def entry_gate(self, h: int, partition: int, offset: int) -> tuple[int, int | None] | None:
        """``(a, needed)`` when the record of key hash ``h`` at ``(partition, offset)`` must
        wait until ``a`` is reached up to ``needed`` (``reached``; ``None``: not recorded
        yet, so it waits); ``None`` when it need not wait (also for a late record). ``a`` is
        where the key was before its last entry into ``partition`` (a growth's parent, or
        the deleted partition a shrink merged), whatever step is in force at ``offset``."""
        return history_gates.entry_gate(self, h, partition, offset)

    def partition_gates(self, partition: int) -> tuple[PartitionGate, ...]:
        """Every boundary of ``partition`` where keys come in, as a whole-partition gate: a
        growth's new life (needs the parent's marker), a shrink's hold (needs every deleted
        partition merging into it drained). Holding the partition there is exact."""
        self._check_partition(partition)
        gates = self._gates.get(partition)
        if gates is None:
            gates = self._gates[partition] = history_gates.partition_gates(self, partition)
        return gates

    def reached(self, partition: int, needed: int | None, positions: Mapping[int, int]) -> bool:
        """Whether a gate's need ``(partition, needed)`` is met: ``partition`` is read up to
        ``needed`` and, recursively, every partition gate of it below ``needed`` is met.
        ``positions``: partition -> the next offset to read there (or the group's committed
        offset); a missing one is 0. Use this, not a bare position, for every gate."""
        return history_gates.reached(self, partition, needed, positions)

    def read_limit(self, partition: int, positions: Mapping[int, int]) -> int | None:
        """The first offset of ``partition`` its partition gates forbid reading now
        (``None``: no limit); ``positions`` as for ``reached``."""
        return history_gates.read_limit(self, partition, positions)

    def gate(self, partition: int) -> tuple[int, int | None] | None:
        """``(parent, threshold)`` of a grown ``partition``'s last growth (``None``: an
        initial partition). Growth-only callers; ``partition_gates`` covers every life."""
        self._check_partition(partition)
        before = parent(partition, self.initial_partitions)
        if before is None:
            return None
        return before, self.thresholds.get(partition)

    def key_history(self, partition: int) -> list[ReadRange]:
        """Every partition that may hold records of ``partition``'s keys (its keys now, or
        for a deleted partition those of its last life), each bounded by the offset of the
        marker (or drain marker) after which no such record is there (exclusive; ``None``:
        open, or not recorded yet). ``partition`` itself is last."""
        self._check_partition(partition)
        return key_history(self, partition)

    # -- internals

    @cached_property
    def _gates(self) -> dict[int, tuple[PartitionGate, ...]]:
        return {}

    @cached_property
    def _index(self) -> dict[int, _Index]:
        found: dict[int, list[Boundary]] = {}
        n = self.initial_partitions
        for i, step in enumerate(self.steps, start=1):
            if isinstance(step, Grow):
                for child, start in step.starts.items():
                    found.setdefault(child, []).append(Boundary(start, i, "start"))
                for child, marker in step.markers.items():
                    source = parent(child, n)
                    assert source is not None
                    found.setdefault(source, []).append(Boundary(marker + 1, i, "marker", child))
            else:
                for kept, hold in step.holds.items():
                    found.setdefault(kept, []).append(Boundary(hold, i, "hold"))
                for gone, drain in step.drains.items():
                    found.setdefault(gone, []).append(Boundary(drain + 1, i, "drain"))
        index: dict[int, _Index] = {}
        for partition, listed in found.items():
            ordered = tuple(sorted(listed))
            in_force, latest = [], 0
            for boundary in ordered:
                latest = max(latest, boundary.step)
                in_force.append(latest)
            offsets = tuple(b.offset for b in ordered)
            index[partition] = _Index(ordered, offsets, tuple(in_force))
        return index

    def _check_order(self) -> None:
        """Steps are serialized: a later step's boundaries in a partition are at or above
        every boundary of an earlier step there."""
        for partition, index in self._index.items():
            highest: Boundary | None = None
            for boundary in sorted(index.boundaries, key=lambda b: (b.step, b.offset)):
                if (
                    highest is not None
                    and boundary.step > highest.step
                    and boundary.offset < highest.offset
                ):
                    raise ValueError(
                        f"topic {self.name!r}, partition {partition}: step "
                        f"{boundary.step}'s {boundary.kind} boundary at offset "
                        f"{boundary.offset} lies below step {highest.step}'s "
                        f"{highest.kind} boundary at offset {highest.offset}; steps are "
                        "serialized, so a later step's offsets are higher"
                    )
                if highest is None or boundary.offset >= highest.offset:
                    highest = boundary

    def _check_partition(self, partition: int) -> None:
        if not 0 <= partition < self.created:
            raise ValueError(
                f"topic {self.name!r} has {self.created} partitions, no partition {partition}"
            )


_EMPTY = _Index((), (), ())
