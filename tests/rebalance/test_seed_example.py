"""KIP-287's example: 10 partitions and 10 processors; partitions to 15; processors to 15;
partitions to 18. Which processor owns which partition at every step, and every key stays."""

from __future__ import annotations

from rebalance import TopicHistory, bucket, key_hash, plan_scale

N = B = 10


def owners(processors: int, partitions: int) -> list[int]:
    return [bucket(p, B, processors) for p in range(partitions)]


def test_seed_example_step_by_step() -> None:
    steps = [(10, 10), (10, 15), (15, 15), (15, 18)]
    table = {step: owners(*step) for step in steps}
    for (processors, partitions), row in table.items():
        print(f"P={processors:>2} M={partitions:>2}: " + " ".join(f"{o:>2}" for o in row))

    assert table[(10, 10)] == list(range(10))
    # Partitions 10..14 are split from 0..4 and stay with the same processors.
    assert table[(10, 15)] == [*range(10), 0, 1, 2, 3, 4]
    # Five new processors take partitions 10..14 from processors 0..4; nothing else moves.
    assert table[(15, 15)] == list(range(15))
    # Partitions 15..17 are split from 5..7 and stay with processors 5..7.
    assert table[(15, 18)] == [*range(15), 5, 6, 7]

    plan = plan_scale(B, [TopicHistory.of("in", [10, 15])], 10, 15)
    assert [(m.partition, m.source, m.target) for m in plan.moves] == [
        (10, 0, 10),
        (11, 1, 11),
        (12, 2, 12),
        (13, 3, 13),
        (14, 4, 14),
    ]


def test_seed_example_keys_follow_their_processor() -> None:
    keys = [f"user-{i}".encode() for i in range(5000)]
    for key in keys:
        h = key_hash(key)
        p10 = bucket(bucket(h, N, 15), B, 10)
        assert p10 == bucket(bucket(h, N, 10), B, 10) == bucket(h, B, 10)
        p15 = bucket(bucket(h, N, 15), B, 15)
        assert p15 == bucket(bucket(h, N, 18), B, 15) == bucket(h, B, 15)
        # Scaling 10 -> 15 moves a key only to a new processor, split from its old one.
        assert p15 == p10 or (p15 >= 10 and p15 - 10 == p10)
