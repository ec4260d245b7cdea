"""A child process for the crash test: applies deterministic batches until it is killed.

Input record ``i`` has key ``k<(i * 7919) % 101>`` and value ``i``. The batch that starts at
offset ``o`` holds ``1 + (o * 31) % 64`` records. Each key's state is
``{"n": count, "sum": sum of values, "last": last value}``; every batch also records its own
number as the offset of partition 1. Run: python -m tests.statestore.crash_worker DIR
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from statestore import DatabaseIdentity, ProcessorDatabase, StoreSpec

TOPIC = "in"
IDENTITY = DatabaseIdentity("crash-test", 0, {"initial_processors": 1})
STORES = [StoreSpec("fold")]


def record_key(i: int) -> bytes:
    """The key of input record ``i``."""
    return f"k{(i * 7919) % 101}".encode()


def batch_size(offset: int) -> int:
    """How many records the batch starting at ``offset`` holds."""
    return 1 + (offset * 31) % 64


def fold(state: dict[str, Any] | None, i: int) -> dict[str, Any]:
    """The state of a key after record ``i``."""
    if state is None:
        return {"n": 1, "sum": i, "last": i}
    return {"n": state["n"] + 1, "sum": state["sum"] + i, "last": i}


def expected_state(end: int) -> tuple[dict[bytes, dict[str, Any]], int]:
    """The fold of records ``0..end-1`` and the number of batches that cover them."""
    states: dict[bytes, dict[str, Any]] = {}
    for i in range(end):
        key = record_key(i)
        states[key] = fold(states.get(key), i)
    batches, offset = 0, 0
    while offset < end:
        offset += batch_size(offset)
        batches += 1
    if offset != end:
        raise AssertionError(f"offset {end} is not a batch boundary")
    return states, batches


def main(directory: Path) -> None:
    """Apply batches forever, resuming from the stored offsets."""
    database = ProcessorDatabase.open(directory, IDENTITY, STORES)
    offsets = database.offsets()
    offset = offsets.get((TOPIC, 0), 0)
    batches = offsets.get((TOPIC, 1), 0)
    print(f"ready {offset}", flush=True)
    while True:
        batch = database.begin()
        store = batch.store("fold")
        end = offset + batch_size(offset)
        for i in range(offset, end):
            key = record_key(i)
            store.set(key, fold(store.get(key), i))
        batches += 1
        batch.set_offset(TOPIC, 0, end)
        batch.set_offset(TOPIC, 1, batches)
        batch.commit()
        offset = end


if __name__ == "__main__":
    main(Path(sys.argv[1]))
