"""Which compaction tombstones a producer writes (issue 34, compacted inputs): for a keyed
record of a compacted topic whose count changed, one to each partition an earlier count
placed its key on (not where it is placed now), once per (topic, key, step) while the
producer remembers it. (Written to a real broker: tests/integration/test_compacted_inputs.py.)
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework import AppConfig, ConfigError
from framework.config import DEFAULT_TOMBSTONES_CACHED
from framework.coordination.registry import TopicEntry
from framework.errors import SplitstateError
from framework.growth.compaction_writes import CompactionTombstones
from framework.growth.placement import LinearHashPartitioner
from rebalance import TopicHistory, bucket, key_hash


def history(counts: Sequence[int]) -> TopicHistory:
    """A history through ``counts`` (growths and shrinks; boundaries at offset 0)."""
    built = TopicHistory.of("t", [counts[0]])
    for count in counts[1:]:
        if count > built.partitions:
            starts = dict.fromkeys(range(built.partitions, count), 0)
            built = built.grown(count, starts)
        else:
            built = built.shrunk(count, dict.fromkeys(built.survivors(count), 0))
    return built


@st.composite
def histories(draw: st.DrawFn) -> list[int]:
    initial = draw(st.sampled_from([1, 2, 3, 4]))
    counts = [initial]
    for _ in range(draw(st.integers(0, 4))):
        counts.append(draw(st.integers(initial, 4 * initial).filter(lambda c: c != counts[-1])))
    return counts


@given(histories(), st.lists(st.binary(max_size=16), min_size=1, max_size=30))
def test_earlier_homes_are_the_earlier_counts_buckets(counts: list[int], keys: list[bytes]) -> None:
    entry = TopicEntry(history(counts), compacted=True)
    partitioner = LinearHashPartitioner({"t": entry})
    for key in keys:
        h = key_hash(key)
        home = bucket(h, counts[0], counts[-1])
        earlier = {bucket(h, counts[0], c) for c in counts[:-1]} - {home}
        found = partitioner.earlier_homes("t", key)
        if len(counts) == 1:
            assert found is None
            continue
        assert found is not None
        step, partitions = found
        assert step == len(counts) - 1
        assert sorted(partitions) == sorted(earlier) and len(partitions) == len(set(partitions))
        assert all(p < max(counts) for p in partitions)  # a partition Kafka has


def test_a_topic_not_compacted_has_none() -> None:
    partitioner = LinearHashPartitioner({"t": TopicEntry(history([4, 8, 5]))})
    assert partitioner.earlier_homes("t", b"k") is None
    assert partitioner.earlier_homes("other", b"k") is None


def test_a_shrink_sends_them_to_the_deleted_partition() -> None:
    partitioner = LinearHashPartitioner({"t": TopicEntry(history([4, 8, 5]), compacted=True)})
    key = next(k for k in (f"k{i}".encode() for i in range(1000)) if key_hash(k) % 8 == 6)
    assert partitioner.partition("t", key) == 2  # 6 merged into its survivor 2
    assert partitioner.earlier_homes("t", key) == (2, [6])


def test_once_per_key_and_step_while_remembered() -> None:
    tombstones = CompactionTombstones(2)
    assert tombstones.due("t", b"a", 1)
    tombstones.written("t", b"a", 1)
    assert not tombstones.due("t", b"a", 1)
    assert tombstones.due("t", b"a", 2)  # a later step: again
    assert tombstones.due("u", b"a", 1)  # another topic
    tombstones.written("t", b"b", 1)
    assert not tombstones.due("t", b"a", 1)  # used: now the most recent
    tombstones.written("t", b"c", 1)  # evicts b, the least recently used
    assert tombstones.due("t", b"b", 1)
    assert not tombstones.due("t", b"a", 1) and not tombstones.due("t", b"c", 1)
    assert len(tombstones) == 2


def test_zero_remembers_nothing() -> None:
    tombstones = CompactionTombstones(0)
    tombstones.written("t", b"a", 1)
    assert tombstones.due("t", b"a", 1)
    assert len(tombstones) == 0


@pytest.mark.parametrize("cached", [-1, True, 1.5, "10"])
def test_a_bad_cache_size_is_refused_naming_the_fix(cached: object) -> None:
    with pytest.raises(SplitstateError, match=r"compaction_tombstones_cached=.*Fix: pass 0"):
        CompactionTombstones(cached)  # type: ignore[arg-type]


def test_the_config_field_is_validated() -> None:
    config = AppConfig.load(None, app_id="a", inputs=[{"topic": "t"}], initial_processors=1)
    assert config.compaction_tombstones_cached == DEFAULT_TOMBSTONES_CACHED == 100_000
    with pytest.raises(ConfigError, match="compaction_tombstones_cached"):
        AppConfig.load(
            None,
            app_id="a",
            inputs=[{"topic": "t"}],
            initial_processors=1,
            compaction_tombstones_cached=-1,
        )
