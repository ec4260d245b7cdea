"""Growth and shrink steps: boundaries, homes, gates, key histories and refused histories."""

from __future__ import annotations

import pytest

from rebalance import ReadRange, TopicHistory, plan_scale
from rebalance.steps import Boundary, Grow, PartitionGate, Shrink


def _four_eight_five() -> TopicHistory:
    """4 -> 8 (markers 4@10 .. 7@13 in 0..3) -> 5 (holds 1@20, 2@21, 3@22; drains 5@30 ..)."""
    history = TopicHistory.of("t", [4], None).grown(8, {c: 0 for c in range(4, 8)})
    history = history.with_markers({4: 10, 5: 11, 6: 12, 7: 13})
    return history.shrunk(5, {1: 20, 2: 21, 3: 22}).with_drains({5: 30, 6: 31, 7: 32})


def test_counts_created_deleted_and_survivors() -> None:
    history = _four_eight_five()
    assert history.counts == (4, 8, 5)
    assert (history.partitions, history.created) == (5, 8)
    assert history.deleted() == range(5, 8)
    assert [history.survivor(d, 5) for d in (5, 6, 7)] == [1, 2, 3]
    assert TopicHistory.of("t", [4, 16]).survivor(13, 5) == 1  # through 5, deleted too
    assert history.steps[1] == Shrink(5, {1: 20, 2: 21, 3: 22}, {5: 30, 6: 31, 7: 32})


def test_boundaries_steps_and_homes() -> None:
    history = _four_eight_five()
    assert history.boundaries(1) == (Boundary(12, 1, "marker", 5), Boundary(20, 2, "hold"))
    assert history.boundaries(5) == (Boundary(0, 1, "start"), Boundary(31, 2, "drain"))
    h = 5  # a key of 1 under 4 and 5 partitions, of 5 under 8
    assert [history.step_at(1, o) for o in (11, 12, 19, 20)] == [0, 1, 1, 2]
    assert [history.home_at(h, 1, o) for o in (11, 12, 20)] == [1, 5, 1]
    assert [history.home_at(h, 5, o) for o in (0, 30, 31)] == [5, 5, 1]  # 31: late in 5
    assert history.rank(5, 30) == 1 and history.rank(1, 20) == 2


def test_entry_gates() -> None:
    history = _four_eight_five()
    assert history.entry_gate(5, 1, 5) is None  # step 0
    assert history.entry_gate(5, 5, 0) == (1, 12)  # grown: waits for 1 past 5's marker
    assert history.entry_gate(5, 1, 20) == (5, 31)  # merged back: waits for 5 drained
    assert history.entry_gate(1, 1, 20) is None  # 1's own keys never wait
    assert history.entry_gate(5, 1, 12) is None  # late there: not gated
    unrecorded = TopicHistory.of("t", [4, 8], {4: 10}).shrunk(5, {1: 2, 2: 0, 3: 0})
    assert unrecorded.entry_gate(5, 1, 2) == (5, None)


def test_partition_gates_and_read_limit() -> None:
    history = _four_eight_five()
    assert history.partition_gates(1) == (PartitionGate(20, ((5, 31),), 2),)
    assert history.partition_gates(5) == (PartitionGate(0, ((1, 12),), 1),)
    assert history.read_limit(1, {}) == 20
    assert history.read_limit(1, {5: 30}) == 20
    # 5 read past its drain marker, but its life was gated on 1 past 5's marker: not reached
    assert history.read_limit(1, {5: 31}) == 20
    assert not history.reached(5, 31, {5: 31})
    assert history.reached(5, 31, {5: 31, 1: 20})
    assert history.read_limit(1, {5: 31, 1: 20}) is None
    assert history.read_limit(5, {1: 11}) == 0
    assert history.read_limit(0, {}) is None


def test_key_history_through_a_shrink_and_a_regrowth() -> None:
    history = _four_eight_five()
    # 1's keys now include 5's: 5 up to its drain marker.
    assert history.key_history(1) == [ReadRange("t", 5, 30), ReadRange("t", 1, None)]
    # deleted 5: its last life's keys are in 1 before 5's marker and from the hold on.
    assert history.key_history(5) == [ReadRange("t", 1, None), ReadRange("t", 5, 30)]
    regrown = history.grown(7, {5: 40, 6: 41}).with_markers({5: 50, 6: 51})
    # 1 held 5's keys before 5's first marker and again between the hold and the last one.
    assert regrown.key_history(5) == [ReadRange("t", 1, 50), ReadRange("t", 5, None)]
    assert regrown.key_history(1) == [ReadRange("t", 1, None)]
    assert regrown.key_history(7) == [ReadRange("t", 3, None), ReadRange("t", 7, 32)]
    assert regrown.thresholds == {4: 10, 5: 50, 6: 51, 7: 13}


def test_of_builds_growths_with_lives_from_zero() -> None:
    history = TopicHistory.of("t", [4, 6, 13], {4: 100, 12: 360})
    assert history.steps[0] == Grow(6, {4: 0, 5: 0}, {4: 100})
    assert history.thresholds == {4: 100, 12: 360}
    assert history.created == 13 and history.deleted() == range(13, 13)


@pytest.mark.parametrize(
    ("counts", "steps", "message"),
    [
        ((4, 8), (), r"2 partition counts need 1 steps, got 0"),
        ((4, 3), (Shrink(3, {}),), r"step 1 \(4 -> 3\): 3 partitions is below the initial"),
        ((4, 4), (Grow(4, {}),), r"step 1 \(4 -> 4\): the count equals the one before"),
        ((4, 6), (Grow(7, {}),), r"the step's count is 7, not 6"),
        ((4, 6), (Shrink(6, {}),), r"must be a Grow, not a Shrink"),
        ((4, 6), (Grow(6, {4: 0}),), r"no start offset for grown partition\(s\) 5"),
        ((4, 6), (Grow(6, {4: 0, 5: 0, 1: 0}),), r"start offset for partition 1, which is not"),
        ((4, 6), (Grow(6, {4: 0, 5: -1}),), r"start offset of partition 5 is -1"),
        ((4, 6), (Grow(6, {4: 0, 5: 0}, {3: 2}),), r"marker offset for partition 3"),
        (
            (4, 8, 5),
            (Grow(8, dict.fromkeys(range(4, 8), 0)), Shrink(5, {1: 0, 2: 0, 3: 0, 4: 0})),
            r"step 2 \(8 -> 5\): a hold offset for partition 4, which does not survive",
        ),
        (
            (4, 8, 5),
            (Grow(8, dict.fromkeys(range(4, 8), 0)), Shrink(5, {1: 0, 2: 0})),
            r"no hold offset for survivor\(s\) 3",
        ),
        (
            (4, 8, 5),
            (Grow(8, dict.fromkeys(range(4, 8), 0)), Shrink(5, {1: 0, 2: 0, 3: 0}, {4: 9})),
            r"drain marker offset for partition 4, which is not deleted",
        ),
        (
            (4, 8, 5),
            (Grow(8, dict.fromkeys(range(4, 8), 0), {5: 40}), Shrink(5, {1: 7, 2: 0, 3: 0})),
            r"partition 1: step 2's hold boundary at offset 7 lies below step 1's marker",
        ),
    ],
)
def test_refused_histories_name_the_field(
    counts: tuple[int, ...], steps: tuple[Grow | Shrink, ...], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        TopicHistory("t", counts, steps)


def test_builders_refuse_the_wrong_step() -> None:
    with pytest.raises(ValueError, match="the last step is none, not a growth"):
        TopicHistory.of("t", [4]).with_markers({4: 1})
    with pytest.raises(ValueError, match="the last step is a growth, not a shrink"):
        TopicHistory.of("t", [4, 8]).with_drains({5: 1})
    with pytest.raises(ValueError, match="has 8 partitions, no partition 8"):
        TopicHistory.of("t", [4, 8]).step_at(8, 0)
    with pytest.raises(ValueError, match="offset -1 is negative"):
        TopicHistory.of("t", [4, 8]).step_at(1, -1)


def test_deleted_partitions_move_with_their_survivors() -> None:
    history = _four_eight_five()  # 5, 6, 7 deleted into 1, 2, 3
    plan = plan_scale(2, [history], 2, 3)
    assert [(m.partition, m.source, m.target) for m in plan.moves] == [(2, 0, 2), (6, 0, 2)]
    receiver = plan.receivers[2]
    assert receiver.s1 == (("t", 2), ("t", 6))
    # 2's keys include 6's: the receiver reads 6 (in S1) and 2's ancestors are none.
    assert receiver.s2 == (ReadRange("t", 2), ReadRange("t", 6))
    back = plan_scale(2, [history], 3, 2)
    assert {m.partition for m in back.moves} == {2, 6}
