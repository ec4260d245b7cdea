"""The key-range order: every bucket, and every scale's moved keys, is one range of prefixes."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rebalance import bucket, key_hash
from rebalance.key_ranges import (
    PREFIX_BYTES,
    bucket_range,
    handoff_ranges,
    key_prefix,
    moved_range,
    reverse_bits,
    subtract,
    union,
)

HASHES = st.integers(min_value=0, max_value=2**32 - 1)


@st.composite
def counts(draw: st.DrawFn) -> tuple[int, int, int]:
    """(B, P, P') with 1 <= B <= P, P' (two processor counts grown from B)."""
    initial = draw(st.integers(min_value=1, max_value=12))
    before = draw(st.integers(min_value=initial, max_value=initial * 9))
    after = draw(st.integers(min_value=initial, max_value=initial * 9))
    return initial, before, after


def test_reverse_bits() -> None:
    assert reverse_bits(0b0001, 4) == 0b1000
    assert reverse_bits(0b1101, 4) == 0b1011
    assert reverse_bits(0b1101, 2) == 0b10
    assert reverse_bits(1, 32) == 1 << 31


@given(HASHES, counts())
def test_a_key_is_in_the_range_of_its_bucket_and_of_no_other(
    h: int, layout: tuple[int, int, int]
) -> None:
    initial, count, _ = layout
    prefix = key_prefix(h, initial)
    assert len(prefix) == PREFIX_BYTES
    inside = [j for j in range(count) if bucket_range(j, initial, count)[0] <= prefix]
    inside = [j for j in inside if prefix < bucket_range(j, initial, count)[1]]
    assert inside == [bucket(h, initial, count)]


@given(counts())
def test_the_ranges_of_all_buckets_tile_the_whole_order(layout: tuple[int, int, int]) -> None:
    initial, count, _ = layout
    ranges = sorted(bucket_range(j, initial, count) for j in range(count))
    assert ranges[0][0] == bytes(PREFIX_BYTES)
    assert ranges[-1][1] == (initial << 32).to_bytes(PREFIX_BYTES, "big")
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))


@given(st.lists(HASHES, min_size=1, max_size=40), counts())
def test_the_keys_a_scale_moves_are_exactly_one_range(
    hashes: list[int], layout: tuple[int, int, int]
) -> None:
    initial, before, after = layout
    for source in range(before):
        for target in range(after):
            moved = moved_range(source, target, initial, before, after)
            for h in hashes:
                moves = bucket(h, initial, before) == source and bucket(h, initial, after) == target
                prefix = key_prefix(h, initial)
                assert moves == (moved is not None and moved[0] <= prefix < moved[1])


def test_real_keys_sorted_by_prefix_group_by_bucket() -> None:
    """Sorted by prefix, the keys of each of 5 processors (B = 2) are one run."""
    keys = [f"user-{i}".encode() for i in range(2000)]
    ordered = sorted(keys, key=lambda k: key_prefix(key_hash(k), 2))
    runs = [bucket(key_hash(k), 2, 5) for k in ordered]
    changes = sum(1 for a, b in itertools.pairwise(runs) if a != b)
    assert changes == 4 and sorted(set(runs)) == [0, 1, 2, 3, 4]


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="32-bit"):
        key_prefix(2**32, 2)
    with pytest.raises(ValueError, match="not one of 3 buckets"):
        bucket_range(3, 2, 3)


def _inside(prefix: bytes, ranges: list[tuple[bytes, bytes]]) -> bool:
    return any(low <= prefix < high for low, high in ranges)


@given(
    st.lists(HASHES, min_size=1, max_size=40),
    counts(),
    st.integers(min_value=0, max_value=200),
    st.sets(st.integers(min_value=0, max_value=200), max_size=5),
)
def test_handoff_ranges_hold_exactly_the_keys_a_receiver_gains_from_its_sources(
    hashes: list[int], layout: tuple[int, int, int], target: int, sources: set[int]
) -> None:
    initial, before, after = layout
    target %= after
    chosen = {s % before for s in sources}
    ranges = handoff_ranges(initial, before, after, target, chosen)
    assert ranges == union(ranges)  # sorted, disjoint, not adjacent
    for h in hashes:
        gains = bucket(h, initial, after) == target and bucket(h, initial, before) in chosen
        assert gains == _inside(key_prefix(h, initial), ranges)


RANGE = st.tuples(st.binary(min_size=8, max_size=8), st.binary(min_size=8, max_size=8))


@given(st.lists(RANGE, max_size=6), st.lists(RANGE, max_size=6), st.lists(HASHES, max_size=30))
def test_subtract_keeps_exactly_the_prefixes_no_removed_range_holds(
    ranges: list[tuple[bytes, bytes]], removed: list[tuple[bytes, bytes]], hashes: list[int]
) -> None:
    result = subtract(ranges, removed)
    assert result == union(result)
    probes = [h.to_bytes(8, "big") for h in hashes] + [r[0] for r in ranges + removed]
    for prefix in probes:
        expected = _inside(prefix, ranges) and not _inside(prefix, removed)
        assert _inside(prefix, result) == expected
