"""Linear hashing (KIP-253): keys to partitions, partitions to processors, and who split from whom.

``bucket(h, initial, count)`` places a non-negative integer among ``count`` buckets grown from
``initial`` one split at a time. With ``L`` the largest integer such that
``initial * 2**L <= count`` and ``S = count - initial * 2**L``, the bucket is
``h % (initial * 2**L)``, and when that is ``< S`` (already split) it is
``h % (initial * 2**(L + 1))``.

- key -> partition: ``bucket(key_hash(key), N, M)``;
- partition -> processor: ``bucket(partition, B, P)``;
- with ``N == B * 2**k`` and ``B <= P <= M``, key -> processor equals ``bucket(key_hash, B, P)``
  whatever ``M`` is, so growing partitions never moves a key to another processor.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from typing import TYPE_CHECKING

import mmh3

if TYPE_CHECKING:  # numpy only in bucket_array (Spark's folds): a processor's start skips it
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "ancestors",
    "bucket",
    "bucket_array",
    "check_layout",
    "expected_shares",
    "key_hash",
    "key_hashes",
    "level",
    "parent",
]


def level(initial: int, count: int) -> int:
    """The largest ``L`` with ``initial * 2**L <= count`` (``count >= initial >= 1``)."""
    return (count // initial).bit_length() - 1


def bucket(h: int, initial: int, count: int) -> int:
    """The linear-hash bucket of ``h`` among ``count`` buckets grown from ``initial``."""
    if initial < 1:
        raise ValueError(f"initial bucket count must be at least 1, got {initial}")
    if count < initial:
        raise ValueError(
            f"bucket count {count} is below the initial count {initial}; "
            "linear hashing only grows from the initial count"
        )
    if h < 0:
        raise ValueError(f"hash must be non-negative, got {h}; use an unsigned hash")
    low = initial << level(initial, count)
    b = h % low
    if b < count - low:
        b = h % (low << 1)
    return b


def bucket_array(
    hashes: npt.NDArray[np.uint32] | npt.NDArray[np.int64], initial: int, count: int
) -> npt.NDArray[np.int64]:
    """``bucket`` of every element of an array of non-negative hashes, vectorised."""
    import numpy as np  # noqa: PLC0415 - see the import above

    bucket(0, initial, count)  # validates initial and count
    values = np.asarray(hashes, dtype=np.int64)
    if values.size and int(values.min()) < 0:
        raise ValueError("hashes must be non-negative; use unsigned hashes")
    low = initial << level(initial, count)
    result = values % low
    split = result < (count - low)
    result[split] = values[split] % (low << 1)
    return result


def parent(b: int, initial: int) -> int | None:
    """The bucket that ``b`` was split from; ``None`` for the initial buckets ``b < initial``."""
    if initial < 1:
        raise ValueError(f"initial bucket count must be at least 1, got {initial}")
    if b < 0:
        raise ValueError(f"bucket must be non-negative, got {b}")
    if b < initial:
        return None
    return b - (initial << level(initial, b))


def ancestors(b: int, initial: int) -> list[int]:
    """The buckets ``b`` descends from, nearest first (empty for an initial bucket)."""
    chain: list[int] = []
    current = parent(b, initial)
    while current is not None:
        chain.append(current)
        current = parent(current, initial)
    return chain


def key_hash(key: bytes) -> int:
    """murmur3 (x86, 32-bit, seed 0) of the key bytes, unsigned: the hash that places keys."""
    return int(mmh3.hash(key, 0, signed=False))


def key_hashes(keys: Iterable[bytes]) -> list[int]:
    """``key_hash`` of many keys (one call per key; mmh3 has no batch API for 32-bit hashes)."""
    hash32 = mmh3.hash
    return [hash32(key, 0, False) for key in keys]


def check_layout(
    initial_partitions: int, initial_processors: int, partitions: int, processors: int
) -> None:
    """Raise ``ValueError`` unless ``N == B * 2**k`` and ``B <= P <= M``, naming the fix."""
    n, b, m, p = initial_partitions, initial_processors, partitions, processors
    if b < 1:
        raise ValueError(f"initial_processors must be at least 1, got {b}")
    ratio, remainder = divmod(n, b)
    if n < b or remainder or ratio & (ratio - 1):
        raise ValueError(
            f"initial_partitions ({n}) must equal initial_processors ({b}) times a power of "
            f"two (e.g. {b}, {2 * b}, {4 * b}); otherwise keys would move between processors "
            "when partitions grow. Fix: choose initial_processors that divides the topic's "
            "initial partition count by a power of two."
        )
    if m < n:
        raise ValueError(
            f"the topic has {m} partitions, fewer than its initial {n}; partitions can only grow"
        )
    if p < b:
        raise ValueError(
            f"processors ({p}) cannot be below initial_processors ({b}). "
            f"Fix: use at least {b} processors."
        )
    if p > m:
        raise ValueError(
            f"processors ({p}) cannot exceed the input partitions ({m}): a processor owns whole "
            f"partitions. Fix: use at most {m} processors, or grow the topic first "
            "(`splitstate expand`)."
        )


def expected_shares(initial_processors: int, processors: int) -> list[Fraction]:
    """Each processor's fraction of the key space (they sum to 1).

    Even only when ``processors == B * 2**k``; in between, the processors that were split
    (and the new ones split from them) carry half the keys of the others.
    """
    b, p = initial_processors, processors
    if b < 1 or p < b:
        raise ValueError(f"need 1 <= initial_processors <= processors, got {b} and {p}")
    low = b << level(b, p)
    split = p - low
    return [Fraction(1, 2 * low) if (j < split or j >= low) else Fraction(1, low) for j in range(p)]
