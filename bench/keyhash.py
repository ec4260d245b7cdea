"""Keys/s of key_hash + bucket over 1M keys: per key, batched, and vectorised buckets.

Run: .venv/bin/python bench/keyhash.py [--keys N]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import mmh3
import numpy as np

from rebalance import bucket, bucket_array, key_hash, key_hashes

N, B, M, P = 8, 2, 13, 5


def per_key(keys: list[bytes]) -> list[int]:
    """One key_hash and two bucket calls per key (key -> partition, partition -> processor)."""
    return [bucket(bucket(key_hash(k), N, M), B, P) for k in keys]


def batched(keys: list[bytes]) -> list[int]:
    """key_hashes for the batch, then bucket per hash."""
    return [bucket(bucket(h, N, M), B, P) for h in key_hashes(keys)]


def vectorised(keys: list[bytes]) -> list[int]:
    """key_hashes, then numpy buckets for the whole batch."""
    hashes = np.fromiter(key_hashes(keys), dtype=np.int64, count=len(keys))
    result: list[int] = bucket_array(bucket_array(hashes, N, M), B, P).tolist()
    return result


def hash_only(keys: list[bytes]) -> list[int]:
    """The ceiling: mmh3 alone, no bucket."""
    hash32 = mmh3.hash
    return [hash32(k, 0, False) for k in keys]


def main() -> None:
    """Print a table of keys/s for each way."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keys", type=int, default=1_000_000)
    args = parser.parse_args()
    keys = [f"user-{i:09d}".encode() for i in range(args.keys)]
    ways: list[tuple[str, Callable[[list[bytes]], list[int]]]] = [
        ("mmh3 only (ceiling)", hash_only),
        ("per key: key_hash + 2x bucket", per_key),
        ("batched: key_hashes + 2x bucket", batched),
        ("vectorised: key_hashes + bucket_array", vectorised),
    ]
    reference = per_key(keys[:10_000])
    print(f"{'way':<40} {'keys/s':>14} {'seconds':>9}")
    for name, function in ways:
        if function is not hash_only:
            assert function(keys[:10_000]) == reference
        start = time.perf_counter()
        function(keys)
        elapsed = time.perf_counter() - start
        print(f"{name:<40} {args.keys / elapsed:>14,.0f} {elapsed:>9.3f}")


if __name__ == "__main__":
    main()
