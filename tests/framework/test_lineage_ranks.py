"""The Spark fold's order, record by record: ``lineage_ranks`` (each partition's ranks by
offset) looked up by ``Placement.ranks`` (``np.searchsorted`` per partition) equals
``TopicHistory.rank`` at every offset, through growths, shrinks and partitions that live
several times, and sorting a key's records by ``(rank, offset)`` gives their produced order.
The logs are ``tests.rebalance.history_world``'s brute-force ones (fence windows, markers and
drain markers in random order, late records of stale producers)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from framework import AppConfig
from framework.bootstrap.errors import BootstrapError
from framework.bootstrap.history import history_positions, lineage_ranks
from framework.bootstrap.tasks import Placement
from framework.coordination.registry import TopicEntry
from rebalance import TopicHistory
from tests.rebalance.history_world import Rec, World

SEQUENCES = [
    (4, [4, 8, 5, 7, 4, 6]),  # the issue's: 5 lives three times, 4 and 6 twice
    (4, [4, 16, 5, 7]),  # 13's keys: 13, then 1 (through 5, deleted too), then 5
    (2, [2, 8, 2, 8, 3]),
    (4, [4, 6, 8]),  # growths only
]


def _config(*topics: tuple[str, int]) -> AppConfig:
    return AppConfig.load(
        None,
        app_id="ranks",
        inputs=[{"topic": name, "partitions": n} for name, n in topics],
        initial_processors=1,
    )


def _world(n: int, counts: list[int], seed: int) -> World:
    rng = random.Random(seed)
    keys = list(range(64)) + [rng.randrange(2**32) for _ in range(16)]
    return World(n, counts, rng, keys)


def _named(history: TopicHistory, name: str) -> TopicHistory:
    return TopicHistory(name, history.counts, history.steps)


def _placement(config: AppConfig, histories: dict[str, TopicHistory]) -> Placement:
    entries = {name: TopicEntry(history) for name, history in histories.items()}
    return Placement(
        initial_processors=1,
        processors=1,
        targets=(0,),
        topics=tuple(sorted(histories)),
        lineage=lineage_ranks(config, entries),
    )


def _ranks(placement: Placement, topic: int, at: list[tuple[int, int]]) -> list[int]:
    partitions = np.array([p for p, _ in at], dtype=np.int64)
    offsets = np.array([o for _, o in at], dtype=np.int64)
    topics = np.full(len(at), topic, dtype=np.int64)
    return [int(r) for r in placement.ranks(topics, partitions, offsets)]


@pytest.mark.parametrize(("n", "counts"), SEQUENCES, ids=str)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_ranks_are_the_historys_rank_at_every_offset(n: int, counts: list[int], seed: int) -> None:
    world = _world(n, counts, seed)
    history = _named(world.history, "a")
    placement = _placement(_config(("a", n)), {"a": history})
    at = [
        (partition, offset)
        for partition, log in world.logs.items()
        for offset in range(len(log) + 3)  # past the end too: what a later read finds
    ]
    random.Random(seed).shuffle(at)  # the lookup groups rows by partition itself
    assert _ranks(placement, 0, at) == [history.rank(p, o) for p, o in at]
    assert set(placement.lineage) == {("a", p) for p in range(history.created)}


@pytest.mark.parametrize(("n", "counts"), SEQUENCES, ids=str)
@pytest.mark.parametrize("seed", [4, 5])
def test_a_keys_records_by_rank_and_offset_are_in_produced_order(
    n: int, counts: list[int], seed: int
) -> None:
    world = _world(n, counts, seed)
    placement = _placement(_config(("a", n)), {"a": _named(world.history, "a")})
    records = [r for r in world.records() if r.h is not None and not r.late]
    ranks = _ranks(placement, 0, [(r.partition, r.offset) for r in records])
    by_key: dict[int, list[tuple[int, Rec]]] = {}
    for rank, record in zip(ranks, records, strict=True):
        assert record.h is not None
        by_key.setdefault(record.h, []).append((rank, record))
    for listed in by_key.values():
        ordered = sorted(listed, key=lambda item: (item[0], item[1].offset))
        seqs = [record.seq for _, record in ordered]
        assert seqs == sorted(s for s in seqs if s is not None)


def test_partitions_with_several_lives_rank_each_life_and_step() -> None:
    """4 -> 8 -> 5 -> 7 -> 4 -> 6: partition 5 is created, deleted, grown, deleted, grown."""
    world = _world(4, [4, 8, 5, 7, 4, 6], 7)
    history = _named(world.history, "a")
    starts = [b for b in history.boundaries(5) if b.kind == "start"]
    assert [b.step for b in starts] == [1, 3, 5]
    placement = _placement(_config(("a", 4)), {"a": history})
    offsets, steps = placement.lineage[("a", 5)]
    assert offsets[0] == 0 and list(offsets) == sorted(offsets)
    # each life's records rank above the one before's, and the partition it merged into in
    # between (its survivor 1) ranks its held records between the lives
    lives = [_ranks(placement, 0, [(5, b.offset)])[0] for b in starts]
    assert lives == [1, 3, 5]
    drains = [b for b in history.boundaries(5) if b.kind == "drain"]
    holds = [b for b in history.boundaries(1) if b.kind == "hold"]
    assert [b.step for b in drains] == [2, 4] and [b.step for b in holds] == [2, 4]
    assert _ranks(placement, 0, [(1, b.offset) for b in holds]) == [2, 4]
    assert list(steps) == [history.rank(5, o) for o in offsets]


def test_topics_rank_in_config_order_and_every_partition_ever_created_is_read() -> None:
    grown = _named(_world(4, [4, 8, 5], 3).history, "b")
    plain = TopicHistory.of("a", [2])
    config = _config(("b", 4), ("a", 2))  # config order: b first
    placement = _placement(config, {"a": plain, "b": grown})
    assert placement.topics == ("a", "b")  # the job's topic index: sorted names
    every_rank = {rank for (_o, steps) in placement.lineage.values() for rank in steps}
    assert every_rank == {0, 1, 2, 3}  # b: its 3 counts' steps; a: 3, above them
    assert _ranks(placement, 0, [(0, 0), (1, 10**6)]) == [3, 3]
    entries = {"a": TopicEntry(plain), "b": TopicEntry(grown)}
    positions = history_positions(config, entries)
    assert positions == [("b", p) for p in range(8)] + [("a", 0), ("a", 1)]  # 5..7 deleted


def test_a_record_of_a_partition_outside_the_lineage_is_refused() -> None:
    history = _named(_world(4, [4, 8, 5], 3).history, "a")
    placement = _placement(_config(("a", 4)), {"a": history})
    assert _ranks(placement, 0, [(7, 0)]) == [history.rank(7, 0)]  # deleted: still ranked
    with pytest.raises(BootstrapError, match=r"a record of a\[8\] is not in the plan's"):
        _ranks(placement, 0, [(1, 0), (8, 0), (8, 1)])
    with pytest.raises(BootstrapError, match=r"record of \?\[1\] .*\(1 such records\)"):
        _ranks(placement, -1, [(1, 0)])


def test_a_group_with_no_record_to_fold_has_no_ranks() -> None:
    """A group whose keys no target builds (a scale's receiver) ranks nothing."""
    placement = _placement(_config(("a", 4)), {"a": _named(_world(4, [4, 8, 5], 3).history, "a")})
    assert _ranks(placement, 0, []) == []
