"""A key order in which every linear-hash bucket is one contiguous range (issue 15, part 6).

With ``h = key_hash(key) = q * B + r`` (``0 <= r < B``), ``h % (B * 2**L) == B * (q % 2**L) + r``
for every level ``L``: a key's bucket at any processor count is fixed by ``r`` and the low bits
of ``q``. Ordering keys by ``r``, then by ``q`` with its 32 bits reversed (so its lowest bit is
the most significant), puts the keys of each bucket at each count in one range of that order;
the keys a scale moves from one processor to another are then one range too (``moved_range``).

``key_prefix`` is that order as 8 bytes (big-endian ``r``, then the reversed ``q``), meant to be
prepended to a stored key; ranges are half-open ``[low, high)`` over those prefixes.
"""

from __future__ import annotations

from rebalance.linear_hash import level

__all__ = ["PREFIX_BYTES", "bucket_range", "key_prefix", "moved_range", "reverse_bits"]

#: bytes of a key's prefix: 4 of ``r``, 4 of the reversed ``q``
PREFIX_BYTES = 8
_BITS = 32


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
    return r.to_bytes(4, "big") + reverse_bits(q, _BITS).to_bytes(4, "big")


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
