"""Transfer by snapshot: the keys a receiver keeps, the offsets it starts from, and what it
does when a snapshot is missing, damaged or its ingest fails."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from framework.app import App
from framework.input_times import ORDER_SCOPE
from framework.runtime.bulk_starts import bulk_starter
from framework.runtime.catchup import CatchUp
from framework.runtime.retention import check_catch_up_history
from framework.snapshots.source_starts import (
    mark_scope,
    source_mark_scope,
    source_scope,
    source_starts,
)
from framework.snapshots.taker import SnapshotTaker
from framework.snapshots.transfer import SnapshotTransfer
from framework.snapshots.transfer_progress import read_transfer_progress
from rebalance import TopicHistory, bucket, key_hash
from rebalance.control import ControlState
from rebalance.control_records import SnapshotRequest
from rebalance.key_ranges import handoff_ranges
from rebalance.plan import read_set
from statestore.rocks import RocksBackend
from statestore.snapshot_store import SnapshotStore
from tests.clocks import ManualClock
from tests.framework.snapshot_world import (
    KEYS,
    TOPIC,
    config_for,
    fill,
    gained_from,
    joining_transfer,
    open_processor,
    scale_state,
    take,
)


def test_a_transfer_keeps_exactly_the_gained_keys_with_the_snapshot_offsets(
    tmp_path: Path,
) -> None:
    """Processor 2 joins (P 2 -> 3): it gains from processor 0 the keys with h % 4 == 2,
    which live in partition 2; its catch-up starts where processor 0's snapshot ended."""
    config = config_for(tmp_path)
    clock = ManualClock(100.0)
    store = SnapshotStore(config.snapshot_url, config.app_id)
    source = open_processor(config, 0)
    values = fill(source, 0, {0: 500, 2: 700})
    taker = SnapshotTaker(config, 0, source, store, clock, instance="run")
    take(taker, {(TOPIC, 0), (TOPIC, 2)}, ControlState())
    assert taker.latest is not None and taker.latest.generation == 0
    # a transfer for generation 1 waits for a snapshot taken in it
    receiver = open_processor(config, 2)

    transfer = joining_transfer(receiver, store, tmp_path / "work", clock, 1 << 12)
    for _ in range(5):
        clock.now += 1
        assert transfer.poll() is None
    assert "waiting for snapshots of processors [0]" in transfer.describe()
    waiting = read_transfer_progress(tmp_path / "work")
    assert waiting is not None and waiting.phase == "waiting" and waiting.waiting_for == [0]
    assert "processor 2 snapshot transfer waiting" in waiting.render()
    taker.request(SnapshotRequest("r1").id)
    take(taker, {(TOPIC, 0), (TOPIC, 2)}, scale_state())
    assert taker.latest is not None and taker.latest.request == "r1"
    done = None
    reports = []
    for _ in range(10_000):
        clock.now += 1
        if (done := transfer.poll()) is not None:
            break
        reports.append(read_transfer_progress(tmp_path / "work"))
    copying = [r for r in reports if r is not None and r.phase == "copying"]
    assert copying and copying[-1].bytes_total == taker.latest.size, copying[-1:]
    assert 0 < copying[-1].bytes_copied <= copying[-1].bytes_total
    assert any(r is not None and r.phase == "filtering" for r in reports), reports
    expected = {k: v for k, v in values.items() if gained_from(k) == 0}
    assert done == len(expected) > 0
    assert dict(receiver.items("counts")) == expected
    assert receiver.progress("catchup-1") == {(TOPIC, 2): 700}
    assert source_starts(receiver, "catchup-1", frozenset({0})) == {(TOPIC, 2): {0: 700}}
    assert receiver.progress(source_scope("catchup-1", 0)) == {(TOPIC, 2): 700}
    assert receiver.has_flag("catchup-1-bootstrapped")
    assert not (tmp_path / "work").exists()
    source.close()
    receiver.close()


class _Retained:
    """A consumer whose partition 0 retention deleted below 200 (watermarks only)."""

    def watermarks(self, positions: list[tuple[str, int]]) -> dict[tuple[str, int], object]:
        low = {(TOPIC, 0): 200}
        return {p: type("W", (), {"start": low.get(p, 0)})() for p in positions}

    def close(self) -> None:
        """Nothing to close."""


def test_a_scale_in_from_two_sources_reads_no_ancestor_neither_needs(tmp_path: Path) -> None:
    """Scale-in 5 -> 2 after growths 2 -> 4 -> 8: receiver 0 gains {2, 6} from processor 2 and
    {4} from processor 4. Its own partition 0 is an ancestor of both, below thresholds 100 and
    500 that both sources' states already cover: the catch-up must not read it (helper-5's
    review: it started at the lower source's 100, and retention at 200 refused the scale)."""
    config = config_for(tmp_path)
    clock = ManualClock(100.0)
    store = SnapshotStore(config.snapshot_url, config.app_id)
    history = TopicHistory.of(TOPIC, (2, 4, 8), {2: 100, 3: 100, 4: 500, 5: 500, 6: 300, 7: 300})
    handoffs = {2: frozenset({(TOPIC, 2), (TOPIC, 6)}), 4: frozenset({(TOPIC, 4)})}
    for source, offsets in {2: {2: 900, 6: 50}, 4: {4: 70}}.items():
        database = open_processor(config, source)
        batch = database.begin()
        for key in KEYS:
            if bucket(key_hash(key), 2, 5) == source:
                batch.store("counts").set(key, 1)
        for partition, offset in offsets.items():
            batch.set_offset(TOPIC, partition, offset)
        batch.commit()
        take(
            SnapshotTaker(config, source, database, store, clock, instance="run"),
            {(TOPIC, p) for p in offsets},
            scale_state(),
        )
        database.close()
    receiver = open_processor(config, 0)

    transfer = SnapshotTransfer(
        0,
        1,
        scope="catchup-1",
        loaded_flag="catchup-1-bootstrapped",
        handoffs=handoffs,
        topics={TOPIC: history},
        gained={s: handoff_ranges(2, 5, 2, 0, [s]) for s in (2, 4)},
        database=receiver,
        store=store,
        work_dir=tmp_path / "work",
        clock=clock,
        slice_bytes=1 << 20,
    )
    for _ in range(1000):
        clock.now += 1
        if transfer.poll() is not None:
            break
    s1 = sorted(handoffs[2] | handoffs[4])
    bounds = {(r.topic, r.partition): r.end_offset for r in read_set({TOPIC: history}, s1)}
    progress = receiver.progress("catchup-1")
    assert progress[(TOPIC, 0)] >= 500  # neither source needs partition 0
    assert progress[(TOPIC, 2)] == 900 and progress[(TOPIC, 4)] == 70
    reads = {p: (progress.get(p, 0), None if p in s1 else b) for p, b in bounds.items()}
    needed = check_catch_up_history(_Retained(), 0, 1, reads)  # type: ignore[arg-type]
    assert (TOPIC, 0) not in needed
    receiver.close()


def test_an_ingest_that_fails_keeps_its_files_for_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ingest fails after the bulk load is recorded (a full disk); the run unwinds and
    cancels the transfer. The recorded load's files must stay, so the next start finishes it
    (helper-5's review: the work directory went, and the state never opened again)."""
    config = config_for(tmp_path)
    clock = ManualClock(100.0)
    store = SnapshotStore(config.snapshot_url, config.app_id)
    source = open_processor(config, 0)
    values = fill(source, 0, {0: 500, 2: 700})
    take(
        SnapshotTaker(config, 0, source, store, clock, instance="run"),
        {(TOPIC, 0), (TOPIC, 2)},
        scale_state(),
    )
    source.close()
    receiver = open_processor(config, 2)

    transfer = joining_transfer(receiver, store, tmp_path / "work", clock, 1 << 20)

    def full_disk(*_args: object) -> None:
        raise Exception("IO error: No space left on device")

    monkeypatch.setattr(RocksBackend, "ingest", full_disk)
    with pytest.raises(Exception, match="No space left"):
        for _ in range(1000):
            clock.now += 1
            transfer.poll()
    # no snapshot captures the half-ingested state with its pending load (helper-6's
    # review: restored on another disk, the load's files are gone and it never opens)
    assert receiver.bulk_load_pending
    own = SnapshotTaker(config, 2, receiver, store, clock, instance="run")
    own.request()
    own.step({(TOPIC, 2)}, scale_state())
    assert own.upload is None and own.taken == 0 and store.manifests(2) == []
    transfer.cancel()  # the run unwinds
    receiver.close()
    monkeypatch.undo()
    again = open_processor(config, 2)  # finishes the recorded load
    try:
        assert dict(again.items("counts")) == {
            k: v for k, v in values.items() if gained_from(k) == 0
        }
        assert again.progress(source_scope("catchup-1", 0)) == {(TOPIC, 2): 700}
    finally:
        again.close()


def test_a_transfer_whose_snapshot_is_damaged_takes_another(tmp_path: Path) -> None:
    """A file of the snapshot a receiver chose is damaged: it takes the newest other one
    instead of the same one again and again (helper-6's review: the scale never ended)."""
    config = config_for(tmp_path)
    clock = ManualClock(100.0)
    store = SnapshotStore(config.snapshot_url, config.app_id)
    source = open_processor(config, 0)
    fill(source, 0, {0: 500, 2: 700})
    taker = SnapshotTaker(config, 0, source, store, clock, instance="run")
    both = {(TOPIC, 0), (TOPIC, 2)}
    take(taker, both, scale_state())
    damaged = taker.latest
    assert damaged is not None
    batch = source.begin()
    batch.set_offset(TOPIC, 2, 750)
    batch.commit()
    taker.request()
    take(taker, both, scale_state())
    for file in damaged.files:  # files of its own (the next snapshot shares the SST files)
        if not file.name.endswith(".sst"):
            target = Path(config.snapshot_url) / config.app_id / "processor-0" / file.path
            target.write_bytes(b"damage" + target.read_bytes()[6:])
    receiver = open_processor(config, 2)

    transfer = joining_transfer(receiver, store, tmp_path / "work", clock, 1 << 12)
    done = None
    for _ in range(2_000):
        clock.now += 1
        if (done := transfer.poll()) is not None:
            break
    assert done is not None, transfer.describe()
    assert receiver.progress("catchup-1") == {(TOPIC, 2): 750}
    source.close()
    receiver.close()


def test_a_source_without_any_snapshot_has_its_keys_replayed_from_0(tmp_path: Path) -> None:
    """The issue's fallback: a receiver replays a source's keys from offset 0 (and says so)
    only when that source has no snapshot of this app history at all after a while; one with
    an older snapshot is waited for (its snapshot of the scale is on its way)."""
    config = config_for(tmp_path)
    clock = ManualClock(100.0)
    store = SnapshotStore(config.snapshot_url, config.app_id)
    source = open_processor(config, 0)
    fill(source, 0, {0: 500, 2: 700})
    older = SnapshotTaker(config, 0, source, store, clock, instance="run")
    take(older, {(TOPIC, 0), (TOPIC, 2)}, ControlState())  # generation 0: not of the scale
    receiver = open_processor(config, 2)
    waiting = joining_transfer(
        receiver, store, tmp_path / "work", clock, 1 << 12, fallback_seconds=60.0
    )
    for _ in range(300):
        clock.now += 1
        assert waiting.poll() is None
    assert receiver.progress(source_scope("catchup-1", 0)) == {}
    waiting.cancel()
    store.delete_processor(0)  # now it has none at all
    replaying = joining_transfer(
        receiver, store, tmp_path / "work", clock, 1 << 12, fallback_seconds=60.0
    )
    done = None
    for _ in range(120):
        clock.now += 1
        if (done := replaying.poll()) is not None:
            break
    assert done == 0
    assert receiver.progress(source_scope("catchup-1", 0)) == {(TOPIC, 2): 0}
    assert receiver.progress("catchup-1") == {(TOPIC, 2): 0}
    assert receiver.has_flag("catchup-1-bootstrapped")
    source.close()
    receiver.close()


def test_a_source_that_released_without_a_covering_snapshot_has_its_keys_replayed(
    tmp_path: Path,
) -> None:
    """Seed 790: a receiver's earlier run replayed instead (its source had no snapshot yet)
    and wrote CAUGHT_UP; its disk was lost, and the source, restarted, released at once and
    then took snapshots without the partition it gave away. The receiver's next run waited
    for a snapshot of the scale covering that partition, which the source can no longer take:
    the scale never ended. Once the source released, the receiver replays instead."""
    config = config_for(tmp_path)
    clock = ManualClock(100.0)
    store = SnapshotStore(config.snapshot_url, config.app_id)
    source = open_processor(config, 0)
    fill(source, 0, {0: 500, 2: 700})
    taker = SnapshotTaker(config, 0, source, store, clock, instance="run")
    take(taker, {(TOPIC, 0)}, scale_state())  # after its release of partition 2
    scale = scale_state().scaling
    assert scale is not None
    receiver = open_processor(config, 2)
    catchup = SimpleNamespace(
        sources=frozenset({0}),
        scope="catchup-1",
        topics={TOPIC: TopicHistory(TOPIC, (4,))},
        gained_ranges={0: handoff_ranges(2, 2, 3, 2, [0])},
        released={},
    )
    start = bulk_starter(App(config), 2, scale, receiver, clock)
    assert start is not None
    transfer = start(cast(CatchUp, catchup))
    assert transfer is not None
    for _ in range(60):  # not released yet: its snapshot of the scale may still come
        clock.now += 1
        assert transfer.poll() is None
    catchup.released = {(TOPIC, 2): 700}  # the RELEASE is read
    done = None
    for _ in range(3 * int(config.snapshots.interval_seconds)):
        clock.now += 1
        if (done := transfer.poll()) is not None:
            break
    assert done == 0, transfer.describe()
    assert receiver.progress(source_scope("catchup-1", 0)) == {(TOPIC, 2): 0}
    assert receiver.progress("catchup-1") == {(TOPIC, 2): 0}
    source.close()
    receiver.close()


def test_the_released_fallback_warning_says_why_and_no_wrong_fix(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A source that released its partitions before any snapshot of the scale covered them
    can never take one: the warning says that, and does not ask whether the source can
    write to snapshots.url (it can: its newer snapshots are there)."""
    config = config_for(tmp_path)
    clock = ManualClock(100.0)
    store = SnapshotStore(config.snapshot_url, config.app_id)
    source = open_processor(config, 0)
    fill(source, 0, {0: 500, 2: 700})
    taker = SnapshotTaker(config, 0, source, store, clock, instance="run")
    take(taker, {(TOPIC, 0)}, scale_state())  # after its release of partition 2
    receiver = open_processor(config, 2)
    released = {(TOPIC, 2): 700}
    transfer = joining_transfer(
        receiver,
        store,
        tmp_path / "work",
        clock,
        1 << 12,
        fallback_seconds=5.0,
        released=lambda: released,
    )
    with caplog.at_level("WARNING", logger="framework.snapshots.source_starts"):
        for _ in range(20):
            clock.now += 1
            if transfer.poll() is not None:
                break
    fallback = [r.getMessage() for r in caplog.records if "offset 0 instead" in r.getMessage()]
    assert len(fallback) == 1, caplog.text
    assert "released them before any snapshot of the scale covered them" in fallback[0]
    assert "writable" not in fallback[0], fallback[0]
    source.close()
    receiver.close()


def test_a_transfer_carries_the_sources_marks_at_its_offsets(tmp_path: Path) -> None:
    """The source's snapshot holds its ``order-mark`` (a canonical app's marks at its
    offsets): the transfer gives the receiver's catch-up the mark at each offset it starts
    from (``catchup-1-mark``), so it reads on from there instead of from the start."""
    config = config_for(tmp_path)
    clock = ManualClock(100.0)
    store = SnapshotStore(config.snapshot_url, config.app_id)
    source = open_processor(config, 0)
    fill(source, 0, {0: 500, 2: 700})
    batch = source.begin()
    batch.set_progress(ORDER_SCOPE, TOPIC, 0, 3_100)
    batch.set_progress(ORDER_SCOPE, TOPIC, 2, 4_200)
    batch.commit()
    taker = SnapshotTaker(config, 0, source, store, clock, instance="run")
    taker.request(SnapshotRequest("r1").id)
    take(taker, {(TOPIC, 0), (TOPIC, 2)}, scale_state())
    receiver = open_processor(config, 2)
    transfer = joining_transfer(receiver, store, tmp_path / "work", clock, 1 << 12)
    for _ in range(10_000):
        clock.now += 1
        if transfer.poll() is not None:
            break
    assert receiver.progress("catchup-1") == {(TOPIC, 2): 700}
    assert receiver.progress(source_mark_scope("catchup-1", 0)) == {(TOPIC, 2): 4_200}
    assert receiver.progress(mark_scope("catchup-1")) == {(TOPIC, 2): 4_200}
    source.close()
    receiver.close()
