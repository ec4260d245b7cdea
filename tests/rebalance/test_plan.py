"""Scale plans: moves, S1 and S2 (with lineage bounds), and refusals that name the fix."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rebalance import ReadRange, TopicHistory, ancestors, bucket, key_hash, plan_scale


def test_scale_out_two_to_three_on_eight_partitions() -> None:
    plan = plan_scale(2, [TopicHistory.of("words", [8])], 2, 3)
    # Processor 2 is split from processor 0 and takes half of its partitions.
    assert [(m.partition, m.source, m.target) for m in plan.moves] == [(2, 0, 2), (6, 0, 2)]
    receiver = plan.receivers[2]
    assert receiver.s1 == (("words", 2), ("words", 6))
    assert receiver.s2 == (ReadRange("words", 2), ReadRange("words", 6))
    assert receiver.sources == (0,)


def test_scale_out_several_at_once_moves_each_partition_straight_to_its_owner() -> None:
    plan = plan_scale(2, [TopicHistory.of("words", [8])], 2, 5)
    assert sorted(plan.receivers) == [2, 3, 4]
    assert {(m.partition, m.source, m.target) for m in plan.moves} == {
        (2, 0, 2),
        (6, 0, 2),
        (3, 1, 3),
        (7, 1, 3),
        (4, 0, 4),
    }


def test_scale_in_returns_partitions_to_the_parents() -> None:
    plan = plan_scale(2, [TopicHistory.of("words", [8])], 5, 2)
    assert sorted(plan.receivers) == [0, 1]
    assert plan.receivers[0].s1 == (("words", 2), ("words", 4), ("words", 6))
    assert plan.receivers[0].sources == (2, 4)
    assert plan.receivers[1].s1 == (("words", 3), ("words", 7))


def test_s2_includes_ancestors_bounded_by_thresholds() -> None:
    # 4 partitions grown to 6 (4 from 0, 5 from 1), then to 13 (8..12 from 0..4).
    history = TopicHistory.of(
        "events",
        [4, 6, 13],
        thresholds={4: 100, 5: 110, 6: 300, 7: 310, 8: 320, 9: 330, 10: 340, 11: 350, 12: 360},
    )
    # Partition 12 was split from 4 (at offset 360 of 4), which was split from 0 (at 100 of 0).
    assert history.key_history(12) == [
        ReadRange("events", 0, 100),
        ReadRange("events", 4, 360),
        ReadRange("events", 12, None),
    ]
    plan = plan_scale(4, [history], 4, 8)
    receiver = plan.receivers[4]
    assert ("events", 4) in receiver.s1 and ("events", 12) in receiver.s1
    # Partition 4 is in S1 (read to the handoff), so its bound from 12's lineage is dropped.
    assert ReadRange("events", 4, None) in receiver.s2
    assert ReadRange("events", 0, 100) in receiver.s2
    assert all(read.partition != 1 for read in receiver.s2)


def test_unknown_thresholds_leave_the_ancestor_open() -> None:
    history = TopicHistory.of("t", [2, 3])
    assert history.key_history(2) == [ReadRange("t", 0, None), ReadRange("t", 2, None)]


@pytest.mark.parametrize(
    ("counts", "old", "new", "message"),
    [
        (
            [8],
            2,
            9,
            r"requested processors: processors \(9\) cannot exceed the input partitions \(8\)",
        ),
        ([8], 2, 1, r"requested processors: processors \(1\) cannot be below initial_processors"),
        ([6], 2, 3, r"initial_partitions \(6\) must equal initial_processors \(2\) times a power"),
        ([8], 3, 3, r"already runs 3 processors; nothing to change"),
    ],
)
def test_refusals_name_the_numbers(counts: list[int], old: int, new: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        plan_scale(2, [TopicHistory.of("t", counts)], old, new)


def test_history_validation() -> None:
    with pytest.raises(ValueError, match="partition counts must grow, got 8 then 8"):
        TopicHistory.of("t", [8, 8])
    with pytest.raises(ValueError, match="not created by a growth"):
        TopicHistory.of("t", [4, 6], thresholds={2: 5})
    with pytest.raises(ValueError, match="has 6 partitions, no partition 6"):
        TopicHistory.of("t", [4, 6]).key_history(6)


@given(
    st.integers(min_value=1, max_value=4),
    st.integers(min_value=0, max_value=2),
    st.integers(min_value=0, max_value=9),
    st.data(),
)
def test_plan_agrees_with_key_ownership(b: int, k: int, growth: int, data: st.DataObject) -> None:
    n = b * 2**k
    m = n + growth
    old = data.draw(st.integers(min_value=b, max_value=m))
    new = data.draw(st.integers(min_value=b, max_value=m).filter(lambda x: x != old))
    plan = plan_scale(b, [TopicHistory.of("t", [n, m] if growth else [n])], old, new)
    moved = {m_.partition: m_ for m_ in plan.moves}
    for i in range(500):
        h = key_hash(str(i).encode())
        partition = bucket(h, n, m)
        before, after = bucket(h, b, old), bucket(h, b, new)
        if before != after:
            assert moved[partition].source == before
            assert moved[partition].target == after
            receiver = plan.receivers[after]
            assert ("t", partition) in receiver.s1
            readable = {r.partition for r in receiver.s2}
            # Every partition this key ever lived in is read by its new owner.
            assert partition in readable
            assert set(ancestors(partition, n)) <= readable
        else:
            assert partition not in moved
