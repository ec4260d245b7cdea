"""Linear hashing: the properties splitstate's promises rest on, checked with hypothesis."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rebalance import (
    ancestors,
    bucket,
    bucket_array,
    check_layout,
    expected_shares,
    key_hash,
    key_hashes,
    parent,
)

HASHES = st.integers(min_value=0, max_value=2**32 - 1)


@st.composite
def layouts(draw: st.DrawFn) -> tuple[int, int, int, int]:
    """(N, B, M, P) with N = B * 2**k and B <= P <= M."""
    b = draw(st.integers(min_value=1, max_value=12))
    n = b * 2 ** draw(st.integers(min_value=0, max_value=3))
    m = draw(st.integers(min_value=n, max_value=4 * n + 7))
    p = draw(st.integers(min_value=b, max_value=min(m, 4 * b + 5)))
    return n, b, m, p


def test_formula_by_hand() -> None:
    # 4 buckets grown from 4 to 6: L=0, S=2; buckets 0 and 1 were split into 4 and 5.
    assert [bucket(h, 4, 6) for h in range(8)] == [0, 1, 2, 3, 4, 5, 2, 3]
    assert bucket(9, 4, 6) == 1  # 9 % 4 = 1 < 2 -> 9 % 8 = 1
    assert bucket(13, 4, 6) == 5  # 13 % 4 = 1 < 2 -> 13 % 8 = 5
    assert bucket(7, 4, 4) == 3
    assert bucket(123, 1, 1) == 0


@pytest.mark.parametrize(
    ("h", "initial", "count", "message"),
    [
        (1, 0, 4, "initial bucket count must be at least 1"),
        (1, 4, 3, "bucket count 3 is below the initial count 4"),
        (-1, 4, 4, "hash must be non-negative"),
    ],
)
def test_bucket_rejects_bad_input(h: int, initial: int, count: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        bucket(h, initial, count)


@settings(max_examples=300)
@given(layouts(), HASHES)
def test_key_to_processor_ignores_partitions(layout: tuple[int, int, int, int], h: int) -> None:
    n, b, m, p = layout
    assert bucket(bucket(h, n, m), b, p) == bucket(h, b, p)


@settings(max_examples=300)
@given(layouts(), HASHES, st.integers(min_value=1, max_value=40))
def test_growing_partitions_never_moves_a_key(
    layout: tuple[int, int, int, int], h: int, growth: int
) -> None:
    n, b, m, p = layout
    before = bucket(bucket(h, n, m), b, p)
    after = bucket(bucket(h, n, m + growth), b, p)
    assert before == after


@settings(max_examples=200)
@given(layouts())
def test_adding_one_processor_splits_exactly_one(layout: tuple[int, int, int, int]) -> None:
    _n, b, m, p = layout
    m = max(m, p + 1)
    keys = range(0, 4096 * b)  # whole periods of every modulus involved
    moved_from: set[int] = set()
    moved = 0
    for h in keys:
        old, new = bucket(h, b, p), bucket(h, b, p + 1)
        if old != new:
            assert new == p
            moved_from.add(old)
            moved += 1
    assert moved_from == {parent(p, b)}
    split = parent(p, b)
    assert split is not None
    share = expected_shares(b, p)[split]
    assert Fraction(moved, len(keys)) == share / 2


@settings(max_examples=200)
@given(layouts(), st.integers(min_value=1, max_value=20))
def test_partitions_move_only_to_new_processors(
    layout: tuple[int, int, int, int], extra: int
) -> None:
    _n, b, m, p = layout
    m = max(m, p + extra)
    for partition in range(m):
        old, new = bucket(partition, b, p), bucket(partition, b, p + extra)
        assert new == old or new >= p


@given(st.integers(min_value=1, max_value=50), st.integers(min_value=0, max_value=5000))
def test_parent_inverts_the_split(initial: int, b: int) -> None:
    split_from = parent(b, initial)
    if b < initial:
        assert split_from is None
        return
    assert split_from is not None
    # Before b existed (b buckets), its keys were in the parent; with b+1 buckets, some are in b.
    for h in range(b, b + 4 * (b + 1)):
        if bucket(h, initial, b + 1) == b:
            assert bucket(h, initial, b) == split_from
    assert ancestors(b, initial)[0] == split_from
    assert all(a < initial for a in ancestors(b, initial)[-1:])


@given(st.integers(min_value=1, max_value=16), st.integers(min_value=0, max_value=64))
def test_shares_sum_to_one_and_are_even_at_powers_of_two(b: int, extra: int) -> None:
    p = b + extra
    shares = expected_shares(b, p)
    assert sum(shares) == 1
    if (p // b) & (p // b - 1) == 0 and p % b == 0:
        assert len(set(shares)) == 1


def test_shares_match_measured_fractions() -> None:
    b, p = 3, 5
    counts = [0] * p
    for h in range(3 * 4 * 64):
        counts[bucket(h, b, p)] += 1
    total = sum(counts)
    assert [Fraction(c, total) for c in counts] == expected_shares(b, p)


def test_check_layout_names_the_fix() -> None:
    with pytest.raises(
        ValueError, match=r"initial_partitions \(6\) must equal initial_processors \(4\)"
    ):
        check_layout(6, 4, 6, 4)
    with pytest.raises(ValueError, match=r"initial_partitions \(12\) must equal"):
        check_layout(12, 4, 12, 4)  # 12 = 4 * 3, not a power of two
    with pytest.raises(
        ValueError, match=r"processors \(9\) cannot exceed the input partitions \(8\)"
    ):
        check_layout(8, 2, 8, 9)
    with pytest.raises(
        ValueError, match=r"processors \(1\) cannot be below initial_processors \(2\)"
    ):
        check_layout(8, 2, 8, 1)
    check_layout(8, 2, 13, 5)


def test_key_hash_is_unsigned_murmur3() -> None:
    # Reference values of MurmurHash3_x86_32 with seed 0 (as published with the algorithm).
    assert key_hash(b"") == 0
    assert key_hash(b"hello") == 0x248BFA47
    assert key_hash(b"The quick brown fox jumps over the lazy dog") == 0x2E4FF723
    keys = [f"key-{i}".encode() for i in range(100)]
    assert key_hashes(keys) == [key_hash(k) for k in keys]
    assert all(0 <= h < 2**32 for h in key_hashes(keys))


@given(st.lists(HASHES, max_size=200), st.integers(min_value=1, max_value=16), st.integers(0, 40))
def test_bucket_array_matches_bucket(hashes: list[int], initial: int, extra: int) -> None:
    count = initial + extra
    result = bucket_array(np.array(hashes, dtype=np.uint32), initial, count)
    assert result.tolist() == [bucket(h, initial, count) for h in hashes]
