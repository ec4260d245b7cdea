"""``TopicHistory`` against a brute-force model of the log (``history_world``) over random
count sequences (growths, shrinks, multi-level ones, regrowths): homes and late records, key
-> processor, the lineage order, key histories, scale plans, and two readers that never
deadlock and read each key's records in the order produced."""

from __future__ import annotations

import random
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rebalance import Grow, TopicHistory, bucket, plan_scale
from tests.rebalance.history_world import Rec, World, read

FIXED = [
    (2, [4, 8, 5, 7, 4, 6]),
    (2, [4, 16, 5]),  # 13 -> 1 through 5, deleted too
    (1, [4, 16, 5, 16, 4]),
    (2, [4, 16, 5, 7]),  # 13's keys: 13, then 1, then 5
    (4, [4, 16, 5, 6]),  # 9's keys: 9, then 1 (merged), still 1 after 5 splits off 1
    (2, [2, 8, 2, 8, 3]),
]


@st.composite
def _worlds(draw: st.DrawFn) -> tuple[int, World]:
    b = draw(st.sampled_from([1, 2]))
    n = b * 2 ** draw(st.integers(0, 2))
    counts = [n]
    for _ in range(draw(st.integers(1, 5))):
        count = draw(st.integers(n, 4 * n))
        if count == counts[-1]:
            count = n if count != n else 4 * n
        counts.append(count)
    return b, _world(n, counts, draw(st.integers(0, 2**32 - 1)))


def _world(n: int, counts: list[int], seed: int) -> World:
    rng = random.Random(seed)
    keys = list(range(64)) + [rng.randrange(2**32) for _ in range(16)]
    return World(n, counts, rng, keys)


def _by_key(records: list[Rec]) -> dict[int, list[Rec]]:
    found: dict[int, list[Rec]] = defaultdict(list)
    for record in records:
        if record.h is not None and not record.late:
            found[record.h].append(record)
    return found


def _check_homes(world: World) -> None:
    history, counts = world.history, world.history.counts
    for record in world.records():
        assert history.step_at(record.partition, record.offset) == record.step, record
        if record.h is not None:
            home = history.home_at(record.h, record.partition, record.offset)
            assert home == bucket(record.h, world.n, counts[record.step])
            assert (home != record.partition) == record.late, record


def _check_processors(b: int, world: World) -> None:
    """A key's processor is ``bucket(h, B, P)`` for every ``P <= min(counts)``, wherever its
    records are (late ones too): no key changes processor, no state moves."""
    for processors in range(b, min(world.counts) + 1):
        for record in world.records():
            if record.h is not None:
                owner = bucket(record.partition, b, processors)
                assert owner == bucket(record.h, b, processors), (processors, record)


def _check_rank_order(world: World) -> None:
    history = world.history
    for records in _by_key(world.records()).values():
        ordered = sorted(records, key=lambda r: (history.rank(r.partition, r.offset), r.offset))
        assert [r.seq for r in ordered] == sorted(r.seq for r in records if r.seq is not None)


def _check_key_histories(world: World) -> None:
    history, counts = world.history, world.history.counts
    by_key = _by_key(world.records())
    for partition in range(history.created):
        last = max(i for i, count in enumerate(counts) if partition < count)
        ranges = history.key_history(partition)
        assert ranges[-1].partition == partition
        assert len({r.partition for r in ranges}) == len(ranges)
        ends = {r.partition: r.end_offset for r in ranges}
        for h, records in by_key.items():
            if bucket(h, world.n, counts[last]) != partition:
                continue
            for record in records:
                assert record.partition in ends, (partition, record)
                end = ends[record.partition]
                assert end is None or record.offset < end, (partition, record, ranges)


def _check_plans(b: int, world: World) -> None:
    history = world.history
    by_key = _by_key(world.records())
    for old in range(b, history.partitions + 1):
        for new in range(b, history.partitions + 1):
            if old == new:
                continue
            plan = plan_scale(b, [history], old, new)
            moved = {m.partition for m in plan.moves}
            for partition in history.deleted():
                changes = bucket(partition, b, old) != bucket(partition, b, new)
                assert (partition in moved) == changes
            for h, records in by_key.items():
                target = bucket(h, b, new)
                if bucket(h, b, old) == target:
                    continue
                s2 = {r.partition: r.end_offset for r in plan.receivers[target].s2}
                for record in records:
                    assert record.partition in s2, (old, new, record)
                    end = s2[record.partition]
                    assert end is None or record.offset < end, (old, new, record)


def _check_reader(world: World, seed: int, *, per_partition: bool) -> None:
    delivered, positions = read(
        world.history, world.logs, random.Random(seed), per_partition=per_partition
    )
    assert positions == {p: len(log) for p, log in world.logs.items()}, "a reader deadlocked"
    produced = sorted(r.seq for r in world.records() if r.seq is not None)
    assert sorted(r.seq for r in delivered if r.seq is not None) == produced
    assert all(r.seq is not None for r in delivered)  # no late record delivered
    last: dict[int, int] = {}
    for record in delivered:
        assert record.h is not None and record.seq is not None
        assert record.seq > last.get(record.h, 0), ("out of produced order", record)
        last[record.h] = record.seq


def _check_all(b: int, world: World, seed: int) -> None:
    _check_homes(world)
    _check_processors(b, world)
    _check_rank_order(world)
    _check_key_histories(world)
    _check_plans(b, world)
    _check_reader(world, seed, per_partition=False)
    _check_reader(world, seed, per_partition=True)


@pytest.mark.parametrize(("b", "counts"), FIXED, ids=[str(c) for _, c in FIXED])
@pytest.mark.parametrize("seed", range(5))
def test_fixed_histories_agree_with_the_brute_force_log(
    b: int, counts: list[int], seed: int
) -> None:
    _check_all(b, _world(counts[0], counts, seed), seed)


@settings(max_examples=60, deadline=None)
@given(_worlds(), st.integers(0, 1000))
def test_random_histories_agree_with_the_brute_force_log(
    world: tuple[int, World], seed: int
) -> None:
    b, built = world
    _check_all(b, built, seed)


def test_a_reader_never_delivers_past_an_unrecorded_boundary_out_of_order() -> None:
    """With the last step's markers (or drain markers) not recorded, gated records wait:
    what is delivered is still in produced order."""
    for seed in range(20):
        world = _world(4, [4, 8, 5, 7], seed)
        full = world.history
        last = full.steps[-1]
        assert isinstance(last, Grow)
        view = TopicHistory(full.name, full.counts[:-1], full.steps[:-1]).grown(
            last.count, last.starts
        )
        for per_partition in (False, True):
            delivered, _ = read(view, world.logs, random.Random(seed), per_partition=per_partition)
            newest: dict[int, int] = {}
            for record in delivered:
                if record.seq is None or record.h is None:
                    continue
                assert record.seq > newest.get(record.h, 0), record
                newest[record.h] = record.seq
