"""The producer's inlined linear-hash partitioner agrees with rebalance.bucket."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from framework.coordination.registry import TopicEntry
from framework.growth.placement import LinearHashPartitioner
from rebalance import TopicHistory, bucket, key_hash


@given(
    st.lists(st.binary(max_size=24), min_size=1, max_size=50),
    st.integers(min_value=1, max_value=16),
    st.integers(min_value=0, max_value=40),
)
def test_partitioner_matches_bucket(keys: list[bytes], initial: int, growth: int) -> None:
    counts = [initial] if growth == 0 else [initial, initial + growth]
    partitioner = LinearHashPartitioner({"t": TopicEntry(TopicHistory.of("t", counts))})
    for key in keys:
        assert partitioner.partition("t", key) == bucket(key_hash(key), initial, counts[-1])
    assert partitioner.partitions("t") == counts[-1]
