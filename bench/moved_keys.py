"""What a scale costs the state stores: forgetting moved keys, and reading the keys that move.

Stored keys are ordered by linear-hash bucket (``statestore.key_layout``), so the keys a scale
moves are a few ranges. This compares, side by side in one run and on the same databases, the
two ways of each job for a 2 -> 3 scale (processor 0 gives half of its keys to 2):

- forget the moved keys: scan every key and delete those that moved (what a key-order layout
  must do) vs range deletes (what splitstate does);
- read the moved keys (what a transfer does with a source's snapshot): scan every key and keep
  those that moved vs range scans of the moved ranges.

For several state sizes: the range versions should not grow with the keys that stay.

Run: .venv/bin/python bench/moved_keys.py [--keys 100000 1000000]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path: drop it (see bench/statestore.py)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]

from rebalance import bucket, key_hash  # noqa: E402
from rebalance.key_ranges import handoff_ranges  # noqa: E402
from statestore import DatabaseIdentity, ProcessorDatabase, StoreSpec  # noqa: E402
from statestore.checkpoints import scan_ranges  # noqa: E402

B = 2
IDENTITY = DatabaseIdentity("bench-moved", 0, {"initial_processors": B})
STORES = [StoreSpec("counts")]
RANGES = handoff_ranges(B, 2, 3, 2, [0])


def moved(key: bytes) -> bool:
    """Of 2 -> 3: processor 0's keys that processor 2 gains."""
    return bucket(key_hash(key), B, 3) == 2


def fill(path: Path, keys: int) -> ProcessorDatabase:
    """Processor 0 of 2 holding ``keys`` keys of its own (100-byte values)."""
    database = ProcessorDatabase.open(path, IDENTITY, STORES)
    value, written, i = "v" * 100, 0, 0
    while written < keys:
        batch = database.begin()
        store = batch.store("counts")
        for _ in range(min(10_000, keys - written)):
            key = f"key-{i:012d}".encode()
            i += 1
            while bucket(key_hash(key), B, 2) != 0:
                key = f"key-{i:012d}".encode()
                i += 1
            store.set(key, value)
            written += 1
        batch.commit()
    return database


def timed(function: Callable[[], int]) -> tuple[float, int]:
    """Seconds ``function`` took, and what it returned (keys touched)."""
    start = time.perf_counter()
    result = function()
    return time.perf_counter() - start, result


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, nargs="+", default=[100_000, 1_000_000])
    args = parser.parse_args()
    rows: list[tuple[int, str, float, float, int]] = []
    scratch = Path(tempfile.mkdtemp(prefix="bench-moved-keys-"))
    try:
        for count in args.keys:
            database = fill(scratch / f"scan-{count}" / "processor-0", count)
            backend = database.backend
            read_scan = timed(
                lambda b=backend: sum(  # type: ignore[misc]
                    1 for key, _ in b.scan("counts") if moved(key[8:])
                )
            )
            read_range = timed(
                lambda b=backend: sum(1 for _ in scan_ranges(b, "counts", RANGES, None))  # type: ignore[misc]
            )
            forget_scan = timed(lambda d=database: d.delete_keys(moved))  # type: ignore[misc]
            database.close()
            database = fill(scratch / f"range-{count}" / "processor-0", count)

            def forget(d: ProcessorDatabase = database) -> int:
                d.delete_ranges(B, RANGES)
                return len(RANGES)

            forget_range = timed(forget)
            left = sum(1 for _ in database.items("counts"))
            assert left == count - forget_scan[1], (left, count, forget_scan[1])
            database.close()
            rows.append((count, "read the moved keys", read_scan[0], read_range[0], read_scan[1]))
            rows.append((count, "forget the moved keys", forget_scan[0], forget_range[0], left))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(
        f"{'keys held':>10} {'job (2 -> 3: half of 0 moves)':<30} {'scan+filter s':>14} "
        f"{'ranges s':>10} {'ratio':>8}"
    )
    for count, job, scan, ranged, _ in rows:
        print(f"{count:>10,} {job:<30} {scan:>14.3f} {ranged:>10.4f} {scan / ranged:>7.0f}x")


if __name__ == "__main__":
    main()
