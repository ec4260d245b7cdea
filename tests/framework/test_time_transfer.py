"""Window state, key time and due times live in stores ``splitstate.time`` and
``splitstate.due`` under the user key, so a snapshot transfer moves them with the keys, a
range delete (a receiver's stale keys, a source's purge) removes them, and a tick after either
finds exactly the keys due (the due index is rebuilt after an ingest or a range delete)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from framework.app import App
from framework.runtime.catchup import CatchUp
from framework.snapshots.taker import SnapshotTaker
from framework.snapshots.transfer import SnapshotTransfer
from framework.time.key_clock import TIME_STORE
from rebalance import TopicHistory
from rebalance.key_ranges import handoff_ranges
from statestore import DatabaseIdentity, ProcessorDatabase
from statestore.due_index import DUE_STORE, NEVER, encode_due
from statestore.snapshot_store import SnapshotStore
from tests.clocks import ManualClock
from tests.framework.snapshot_world import config_for, scale_state, take
from tests.framework.time_world import (
    OUT,
    TIME_STORES,
    TOPIC,
    Owner,
    append_record,
    append_tick,
    catch_up,
    keys_in,
    memory_kafka,
    released,
    scaled,
    started,
    state_of,
    stored,
    windowed,
)

#: 4 partitions, no growth
FLAT = {"counts": [4], "thresholds": {}}
#: a time no due time reaches
ALWAYS = 1 << 62


def open_processor(app: App, processor: int) -> ProcessorDatabase:
    identity = DatabaseIdentity(app.config.app_id, processor, {"initial_processors": 2})
    path = app.config.app_state_dir / f"processor-{processor}"
    return ProcessorDatabase.open(path, identity, app.store_specs())


def due(database: ProcessorDatabase) -> list[bytes]:
    """The keys a tick would find due by any time."""
    batch = database.begin()
    try:
        return batch.due_keys(ALWAYS, ALWAYS)
    finally:
        batch.abort()


@dataclass
class TickingMeanwhile:
    """A receiver's bulk build while its live loop applies ticks between steps (which reads
    its due index: a receiver that owns partitions already)."""

    transfer: SnapshotTransfer
    database: ProcessorDatabase
    polled_every: bool = False

    def describe(self) -> str:
        return self.transfer.describe()

    def cancel(self) -> None:
        self.transfer.cancel()

    def poll(self) -> int | None:
        due(self.database)
        return self.transfer.poll()


def test_a_snapshot_transfer_moves_the_keys_time_and_a_purge_removes_it(
    tmp_path: Path,
) -> None:
    """Scale 2 -> 3: processor 2 gains partition 2 from processor 0 by its snapshot (to
    offset 5), then replays 5..8: its gained keys' windows, key times and due times equal
    the source's at F; a tick of the tail closes windows the snapshot brought (found in the
    due index, rebuilt after the ingest); a stale key time left from an earlier membership is
    gone. The source's purge removes the moved keys' time and due times, and its ticks find
    only its own key due after it."""
    app = windowed(config_for(tmp_path, outputs=[{"topic": OUT}]))
    kafka = memory_kafka(4)
    g1, g2, g3 = keys_in(2, 4, 4, 3)
    own = keys_in(0, 4, 4, 1)[0]
    append_record(kafka, 0, own, 7, at=1_000)
    append_record(kafka, 2, g1, 1, at=1_000)
    append_record(kafka, 2, g2, 2, at=2_000)
    append_tick(kafka, 2, floor=12_000)  # closes g1's and g2's windows
    append_record(kafka, 2, g1, 3, at=15_000)
    append_record(kafka, 2, g3, 4, at=16_000)  # the snapshot covers partition 2 to here
    append_record(kafka, 2, g2, 5, at=3_000)  # late
    append_tick(kafka, 2, floor=30_000)  # closes g1's and g3's windows
    final = append_record(kafka, 2, g2, 6, at=35_000) + 1
    source = Owner(app, 0, database=open_processor(app, 0))
    source.process([*stored(kafka, 0), *stored(kafka, 2)[:5]])
    clock = ManualClock(100.0)
    store = SnapshotStore(app.config.snapshot_url, app.config.app_id)
    taker = SnapshotTaker(app.config, 0, source.database, store, clock, instance="run")
    take(taker, {(TOPIC, 0), (TOPIC, 2)}, scale_state())
    source.process(stored(kafka, 2)[5:])
    assert len(source.emitted) == 2  # the two ticks
    receiver = open_processor(app, 2)
    batch = receiver.begin()  # a key time left from an earlier membership
    batch.store(TIME_STORE).set(g2, b'{"t":{"in":500000},"w":{"average":[[500000,[1,1]]]}}')
    batch.store(DUE_STORE).set(g2, encode_due(511_000, NEVER))
    batch.commit()
    assert due(receiver) == [g2]

    def transfer(catchup: CatchUp) -> TickingMeanwhile:
        built = SnapshotTransfer(
            2, 1, scope=catchup.scope, loaded_flag=f"{catchup.scope}-bootstrapped",
            handoffs={0: frozenset({(TOPIC, 2)})}, topics={TOPIC: TopicHistory(TOPIC, (4,))},
            gained={0: handoff_ranges(2, 2, 3, 2, [0])}, database=receiver, store=store,
            work_dir=tmp_path / "work", clock=kafka.clock, slice_bytes=1 << 12,
        )  # fmt: skip
        return TickingMeanwhile(built, receiver)

    state = released(scaled(started("snaps", 2, 4), 1, 3, FLAT), 0, 2, {2: final})
    catch_up(kafka, app, state, 2, receiver, bootstrap=transfer)
    assert receiver.progress("catchup-1-from-0") == {(TOPIC, 2): 5}  # from the snapshot
    gained = [g1, g2, g3]
    expected = state_of(source.database, gained)
    assert expected["splitstate.due"].keys() == {g2}  # its window [30000, 40000) is open
    assert state_of(receiver, gained) == expected
    assert due(receiver) == [g2]
    assert set(receiver.store_names()) == set(TIME_STORES)
    assert due(source.database) == sorted([own, g2])
    source.database.delete_ranges(2, handoff_ranges(2, 2, 3, 2, [0]))  # the source's purge
    assert state_of(source.database, gained) == {name: {} for name in TIME_STORES}
    assert due(source.database) == [own]
    assert state_of(source.database, [own])["splitstate.due"]
    source.database.close()
    receiver.close()
