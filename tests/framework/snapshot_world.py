"""A small world for the snapshot tests: an app config, processors' databases filled with
keys, a taker stepped to the end of its upload, and a 2 -> 3 joining transfer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from framework.config import AppConfig
from framework.snapshots.taker import SnapshotTaker
from framework.snapshots.transfer import SnapshotTransfer
from rebalance import TopicHistory, bucket, key_hash
from rebalance.control import ControlState
from rebalance.key_ranges import handoff_ranges
from statestore import DatabaseIdentity, ProcessorDatabase, StoreSpec
from statestore.snapshot_store import SnapshotStore
from tests.clocks import ManualClock

TOPIC = "in"


STORES = [StoreSpec("counts")]


KEYS = [f"key-{i}".encode() for i in range(3000)]


def config_for(tmp_path: Path, **fields: object) -> AppConfig:
    return AppConfig.model_validate(
        {
            "app_id": "snaps",
            "inputs": [{"topic": TOPIC, "partitions": 4}],
            "initial_processors": 2,
            "state_dir": str(tmp_path / "state"),
            "snapshots": {"slice_bytes": 1 << 16, "interval_seconds": 10},
            **fields,
        }
    )


def open_processor(config: AppConfig, processor: int) -> ProcessorDatabase:
    identity = DatabaseIdentity(config.app_id, processor, {"initial_processors": 2})
    return ProcessorDatabase.open(config.app_state_dir / f"processor-{processor}", identity, STORES)


def fill(database: ProcessorDatabase, owner: int, offsets: dict[int, int]) -> dict[bytes, int]:
    """Give every key processor ``owner`` owns at P=2 a value; returns them."""
    values = {k: i for i, k in enumerate(KEYS) if bucket(key_hash(k), 2, 2) == owner}
    batch = database.begin()
    for key, value in values.items():
        batch.store("counts").set(key, value)
    for partition, offset in offsets.items():
        batch.set_offset(TOPIC, partition, offset)
    batch.commit()
    return values


def gained_from(key: bytes) -> int | None:
    """Of a 2 -> 3 scale: processor 2 gains from processor 0 the keys with h % 4 == 2."""
    h = key_hash(key)
    return bucket(h, 2, 2) if bucket(h, 2, 3) == 2 else None


def joining_transfer(
    receiver: ProcessorDatabase,
    store: SnapshotStore,
    work: Path,
    clock: ManualClock,
    slice_: int,
    **options: Any,
) -> SnapshotTransfer:
    """Processor 2's transfer of partition 2 from processor 0 in scale 1 (2 -> 3)."""
    return SnapshotTransfer(
        2,
        1,
        scope="catchup-1",
        loaded_flag="catchup-1-bootstrapped",
        handoffs={0: frozenset({(TOPIC, 2)})},
        topics={TOPIC: TopicHistory(TOPIC, (4,))},
        gained={0: handoff_ranges(2, 2, 3, 2, [0])},
        database=receiver,
        store=store,
        work_dir=work,
        clock=clock,
        slice_bytes=slice_,
        **options,
    )


def take(taker: SnapshotTaker, owned: set[tuple[str, int]], state: ControlState) -> None:
    """Step the taker until its upload is done."""
    taken = taker.taken
    taker.step(owned, state)
    while taker.upload is not None:
        assert taker.upload.copied <= taker.upload.total
        taker.step(owned, state)
    assert taker.taken == taken + 1


def scale_state(epoch: str | None = None) -> ControlState:
    """A control state whose last scale has generation 1 (as the taker sees it)."""
    state = ControlState()
    app = {"type": "app", "app_id": "snaps", "initial_processors": 2, "inputs": {TOPIC: 4}}
    for record in (
        {**app, **({"epoch": epoch} if epoch else {})},
        {"type": "generation", "generation": 0, "processors": 2},
        {
            "type": "scale",
            "generation": 1,
            "processors": 3,
            "partitions": {TOPIC: 4},
            "request": "s",
        },
    ):
        state = state.apply(record)
    assert state.scaling is not None and state.scaling.generation == 1, state.ignored
    return state
