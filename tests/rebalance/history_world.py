"""A brute-force model of an input topic through growths and shrinks, for property tests of
``TopicHistory``: one producer per key (it switches to a new count once, in the fence window),
``expand``'s steps in order (measure, record the count, fence window, markers or drain
markers), late records from stale producers, and two readers (per key, per partition).

Each record keeps the step in force in its partition when it was appended, tracked by hand
(a partition takes a step's count from its start or hold, or right after its marker or drain
marker), so the tests compare ``TopicHistory`` with this bookkeeping, not with itself.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rebalance import TopicHistory, bucket, parent


@dataclass(frozen=True)
class Rec:
    """One record of the log: keyed (``h``), or a marker (``h is None``)."""

    partition: int
    offset: int
    h: int | None
    step: int  # the step in force in its partition when it was appended
    late: bool  # placed by a stale producer where its key no longer lives
    seq: int | None  # the key's produced order (None: a marker or a late record)


@dataclass
class World:
    """The log of one topic and its registry history, built step by step."""

    n: int
    counts: Sequence[int]
    rng: random.Random
    keys: list[int]
    writes: int = 30
    logs: dict[int, list[Rec]] = field(default_factory=dict)
    in_force: dict[int, int] = field(default_factory=dict)
    seq: int = 0

    def __post_init__(self) -> None:
        self.history = TopicHistory.of("t", [self.n])
        created = max(self.counts)
        self.logs = {p: [] for p in range(created)}
        self.in_force = dict.fromkeys(range(created), 0)
        self.produce(self.n)
        for count in self.counts[1:]:
            self.step(count)
        self.produce(self.history.partitions)
        self.stale()

    def append(self, partition: int, h: int | None) -> Rec:
        log = self.logs[partition]
        step = self.in_force[partition]
        late = h is not None and bucket(h, self.n, self.history.counts[step]) != partition
        seq = None
        if h is not None and not late:
            self.seq += 1
            seq = self.seq
        record = Rec(partition, len(log), h, step, late, seq)
        log.append(record)
        return record

    def produce(self, count: int, writes: int | None = None) -> None:
        for _ in range(self.writes if writes is None else writes):
            h = self.rng.choice(self.keys)
            record = self.append(bucket(h, self.n, count), h)
            assert not record.late, record  # a producer with the current count is never late

    def stale(self) -> None:
        """A few records of producers paused since an earlier count (only late ones land)."""
        counts = self.history.counts
        for _ in range(self.rng.randrange(4)):
            h = self.rng.choice(self.keys)
            partition = bucket(h, self.n, counts[self.rng.randrange(len(counts))])
            step = self.in_force[partition]
            if bucket(h, self.n, counts[step]) != partition:
                self.append(partition, h)

    def step(self, count: int) -> None:
        before, i = self.history.partitions, len(self.history.counts)
        if count > before:
            starts = {c: len(self.logs[c]) for c in range(before, count)}
            self.history = self.history.grown(count, starts)
            changed = list(starts)
        else:
            holds = {t: len(self.logs[t]) for t in self.history.survivors(count)}
            self.history = self.history.shrunk(count, holds)
            changed = list(holds)
        for partition in changed:
            self.in_force[partition] = i
        self.fence_window(before, count)
        self.stale()
        if count > before:
            self.mark(range(before, count), i, self._parent, self._markers)
        else:
            self.mark(range(count, before), i, lambda d: d, self._drains)
        self.stale()

    def fence_window(self, before: int, count: int) -> None:
        """Each key's one producer switches from ``before`` to ``count`` at some write."""
        switched: set[int] = set()
        for _ in range(self.writes):
            h = self.rng.choice(self.keys)
            if h not in switched and self.rng.random() < 0.3:
                switched.add(h)
            record = self.append(bucket(h, self.n, count if h in switched else before), h)
            assert not record.late, record

    def mark(
        self,
        partitions: range,
        i: int,
        where: Callable[[int], int],
        record: Callable[[dict[int, int]], None],
    ) -> None:
        """Write each marker (in a random order, new-count records in between), record them
        in the registry as they are written or all at the end."""
        order = list(partitions)
        self.rng.shuffle(order)
        written: dict[int, int] = {}
        at_once = self.rng.random() < 0.5
        for partition in order:
            target = where(partition)
            written[partition] = self.append(target, None).offset
            self.in_force[target] = i
            if not at_once:
                record({partition: written[partition]})
            self.produce(self.history.partitions, self.rng.randrange(4))
        if at_once:
            record(written)

    def _parent(self, child: int) -> int:
        found = parent(child, self.n)
        assert found is not None
        return found

    def _markers(self, markers: dict[int, int]) -> None:
        self.history = self.history.with_markers(markers)

    def _drains(self, drains: dict[int, int]) -> None:
        self.history = self.history.with_drains(drains)

    def records(self) -> list[Rec]:
        return [record for log in self.logs.values() for record in log]


def read(
    history: TopicHistory,
    logs: dict[int, list[Rec]],
    rng: random.Random,
    *,
    per_partition: bool,
) -> tuple[list[Rec], dict[int, int]]:
    """Read ``logs`` as a processor would, in a random interleaving: a partition stops at a
    record it may not deliver yet. ``per_partition``: hold whole partitions at
    ``read_limit``; else hold a keyed record at its ``entry_gate``. Returns the delivered
    keyed records (late ones are dead letters, not delivered) and the final positions."""
    positions = dict.fromkeys(logs, 0)
    delivered: list[Rec] = []

    def ready(partition: int) -> bool:
        offset = positions[partition]
        if offset >= len(logs[partition]):
            return False
        if per_partition:
            limit = history.read_limit(partition, positions)
            return limit is None or offset < limit
        record = logs[partition][offset]
        if record.h is None or history.home_at(record.h, partition, offset) != partition:
            return True
        gate = history.entry_gate(record.h, partition, offset)
        return gate is None or history.reached(gate[0], gate[1], positions)

    while True:
        movable = [p for p in logs if ready(p)]
        if not movable:
            return delivered, positions
        partition = rng.choice(movable)
        record = logs[partition][positions[partition]]
        positions[partition] += 1
        if record.h is not None and history.home_at(record.h, partition, record.offset) == (
            partition
        ):
            delivered.append(record)
