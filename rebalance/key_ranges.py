"""A key order in which every linear-hash bucket is one contiguous range (issue 15, part 6).

With ``h = key_hash(key) = q * B + r`` (``0 <= r < B``), ``h % (B * 2**L) == B * (q % 2**L) + r``
for every level ``L``: a key's bucket at any processor count is fixed by ``r`` and the low bits
of ``q``. Ordering keys by ``r``, then by ``q`` with its 32 bits reversed (so its lowest bit is
the most significant), puts the keys of each bucket at each count in one range of that order;
the keys a scale moves from one processor to another are then one range too (``moved_range``).

``key_prefix`` is that order as 8 bytes (big-endian ``r``, then the reversed ``q``): the state
stores prepend it to every stored key. Ranges are half-open ``[low, high)`` over those prefixes;
``handoff_ranges`` and ``subtract`` give the (few) ranges of the keys a purge or a catch-up
deletes, so that one range delete per range replaces a scan of every key.
"""

from __future__ import annotations

from collections.abc import Iterable

from rebalance.linear_hash import level

__all__ = [
    "PREFIX_BYTES",
    "KeyRange",
    "bucket_range",
    "handoff_ranges",
    "key_prefix",
    "moved_range",
    "reverse_bits",
    "subtract",
    "union",
]

#: bytes of a key's prefix: 4 of ``r``, 4 of the reversed ``q``
PREFIX_BYTES = 8
_BITS = 32
#: byte -> the byte with its 8 bits reversed
_REVERSED_BYTES = bytes(int(f"{i:08b}"[::-1], 2) for i in range(256))

#: ``[low, high)`` over 8-byte key prefixes
KeyRange = tuple[bytes, bytes]


def reverse_bits(value: int, bits: int) -> int:
    """The lowest ``bits`` bits of ``value`` in reverse order."""
    result = 0
    for _ in range(bits):
        result = (result << 1) | (value & 1)
        value >>= 1
    return result


def key_prefix(h: int, initial: int) -> bytes:
    """The 8-byte prefix of a key whose hash is ``h`` (32-bit, unsigned) with ``initial``
    buckets at the start (``B``)."""
    if not 0 <= h < 1 << _BITS:
        raise ValueError(f"hash must be a 32-bit unsigned integer, got {h}")
    q, r = divmod(h, initial)
    # q's bits reversed: its bytes in reverse order, each byte's bits reversed
    return r.to_bytes(4, "big") + q.to_bytes(4, "little").translate(_REVERSED_BYTES)


def bucket_range(bucket: int, initial: int, count: int) -> tuple[bytes, bytes]:
    """The prefixes ``[low, high)`` of the keys in ``bucket`` among ``count`` buckets grown
    from ``initial`` (those with ``linear_hash.bucket(h, initial, count) == bucket``)."""
    if not 0 <= bucket < count:
        raise ValueError(f"bucket {bucket} is not one of {count} buckets")
    low_count = initial << level(initial, count)
    split = bucket < count - low_count or bucket >= low_count
    bits = level(initial, count) + (1 if split else 0)
    r, c = bucket % initial, bucket // initial
    start = (r << _BITS) | (reverse_bits(c, bits) << (_BITS - bits))
    end = start + (1 << (_BITS - bits))
    return start.to_bytes(PREFIX_BYTES, "big"), end.to_bytes(PREFIX_BYTES, "big")


def moved_range(
    source: int, target: int, initial: int, before: int, after: int
) -> tuple[bytes, bytes] | None:
    """The prefixes of the keys that bucket ``source`` held among ``before`` buckets and
    bucket ``target`` holds among ``after`` (a scale's handoff), or ``None`` when none.

    Both are ranges of nested halvings of the same space, so they are disjoint or one holds
    the other: the answer is the smaller one (a split moves a part of the source, a merge the
    whole source)."""
    low_a, high_a = bucket_range(source, initial, before)
    low_b, high_b = bucket_range(target, initial, after)
    low, high = max(low_a, low_b), min(high_a, high_b)
    return (low, high) if low < high else None


def union(ranges: Iterable[KeyRange]) -> list[KeyRange]:
    """``ranges`` as sorted, disjoint, non-adjacent ranges covering the same prefixes."""
    merged: list[KeyRange] = []
    for low, high in sorted(r for r in ranges if r[0] < r[1]):
        if merged and low <= merged[-1][1]:
            if high > merged[-1][1]:
                merged[-1] = (merged[-1][0], high)
        else:
            merged.append((low, high))
    return merged


def subtract(ranges: Iterable[KeyRange], removed: Iterable[KeyRange]) -> list[KeyRange]:
    """The prefixes of ``ranges`` that no range of ``removed`` holds (sorted, disjoint)."""
    result: list[KeyRange] = []
    cuts = union(removed)
    for low, high in union(ranges):
        start = low
        for cut_low, cut_high in cuts:
            if cut_high <= start or cut_low >= high:
                continue
            if cut_low > start:
                result.append((start, cut_low))
            start = max(start, cut_high)
            if start >= high:
                break
        if start < high:
            result.append((start, high))
    return result


def handoff_ranges(
    initial: int, before: int, after: int, target: int, sources: Iterable[int]
) -> list[KeyRange]:
    """The prefixes of the keys bucket ``target`` holds among ``after`` buckets whose bucket
    among ``before`` is one of ``sources``: what a scale's receiver gains from them."""
    found = (moved_range(s, target, initial, before, after) for s in set(sources))
    return union(r for r in found if r is not None)
