"""A receiver's catch-up applies the ticks in what it replays (to the keys it gains only), so
it ends with the time state the old owner had at F: windows closed, key time, due times."""

from __future__ import annotations

from pathlib import Path

from framework.snapshots.source_starts import source_starts
from rebalance import TopicHistory
from tests.framework.test_moved_keys import all_completed
from tests.framework.time_world import (
    GRACE,
    SIZE,
    TIME_STORES,
    TOPIC,
    CopiedBuild,
    Owner,
    append_record,
    append_tick,
    catch_up,
    keys_in,
    memory_kafka,
    released,
    results,
    scaled,
    started,
    state_of,
    stored,
    window_app,
)

#: one partition count, no growth
FLAT = {"counts": [2], "thresholds": {}}


def test_a_catch_up_applies_the_ticks_it_replays(tmp_path: Path) -> None:
    """Scale 1 -> 2: processor 1 gains partition 1. A tick there closes two keys' windows
    and makes a later record of one of them late; the receiver's time state equals the
    old owner's at F (before: it never applied the tick, kept the windows open and took the
    late record in)."""
    app = window_app(tmp_path, partitions=2, initial=1)
    kafka = memory_kafka(2)
    a, b, c = keys_in(1, 2, 2, 3)
    append_record(kafka, 1, a, 1, at=1_000)
    append_record(kafka, 1, b, 2, at=2_000)
    append_record(kafka, 1, c, 3, at=15_000)
    append_tick(kafka, 1, floor=SIZE + GRACE + 1)  # closes a's and b's first windows
    append_record(kafka, 1, a, 4, at=25_000)
    append_record(kafka, 1, b, 6, at=5_000)  # late: its window closed at the tick
    final = append_tick(kafka, 1, floor=40_000) + 1
    owner = Owner(app, 0)
    owner.process(stored(kafka, 1))
    assert len(owner.emitted) == 2  # the two ticks closed windows
    state = released(scaled(started("timed", 1, 2), 1, 2, FLAT), 0, 1, {1: final})
    receiver = Owner(app, 1).database
    catch_up(kafka, app, state, 1, receiver)
    expected = state_of(owner.database, [a, b, c])
    assert expected["splitstate.time"] and not expected["splitstate.due"]  # all closed
    assert state_of(receiver, [a, b, c]) == expected
    assert set(receiver.store_names()) == set(TIME_STORES)


#: 2 partitions grown to 4: partition 2 split from 0 at offset 3, partition 3 from 1 at 0
GROWN = {"counts": [2, 4], "thresholds": {"2": 3, "3": 0}}


def test_a_tick_in_an_own_ancestor_leaves_the_receivers_own_keys_alone(tmp_path: Path) -> None:
    """Scale-in 3 -> 2 (one initial processor, 2 partitions grown to 4): processor 0 gains
    partition 2 and reads its own partition 0, 2's parent, below the threshold. A tick there
    at offset 0 found nothing due when it was written, but processor 0's own key has a window
    due by it now: applied again to every key living there, it would close that window in
    restore mode (its result never emitted) and make the key's state differ."""
    app = window_app(tmp_path, partitions=2, initial=1)
    kafka = memory_kafka(4)
    own, gained = keys_in(0, 2, 4, 1)[0], keys_in(2, 2, 4, 1)[0]
    append_tick(kafka, 0, floor=100_000)
    append_record(kafka, 0, gained, 1, at=1_000)
    append_record(kafka, 0, own, 2, at=5_000)
    append_record(kafka, 0, own, 3, at=7_000)  # at the threshold: the own key still lives here
    append_record(kafka, 2, gained, 4, at=3_000)
    append_tick(kafka, 2, floor=20_000)  # closes the gained key's window: mean 2.5
    history = TopicHistory.of(TOPIC, (2, 4), {2: 3, 3: 0})
    receiver = Owner(app, 0, {TOPIC: history})
    receiver.process(stored(kafka, 0))  # processor 0 owned partition 0 all along
    oracle = Owner(app, 0, {TOPIC: history})
    oracle.process([*stored(kafka, 0)[:3], *stored(kafka, 2), *stored(kafka, 0)[3:]])
    assert [results(o) for o in oracle.emitted.values()] == [
        [(gained, b'{"start":0,"end":10000,"value":2.5}')]
    ]
    state = scaled(all_completed(scaled(started("timed", 1, 2), 1, 3, GROWN)), 2, 2, GROWN)
    state = released(state, 2, 0, {2: 2})
    catch_up(kafka, app, state, 0, receiver.database)
    expected = state_of(oracle.database, [own, gained])
    assert expected["splitstate.due"].keys() == {own}  # the own key's window is open
    assert state_of(receiver.database, [own, gained]) == expected


def test_a_tick_below_a_sources_snapshot_is_not_applied_again_to_its_keys(
    tmp_path: Path,
) -> None:
    """Scale-in 4 -> 1 (2 partitions grown to 4, 3 split from 1 at offset 2): processor 0
    gains partition 1 from processor 1, whose snapshot covers it to offset 6, and partition
    3 from processor 3, which had no snapshot: its keys are replayed from 0, also in their
    parent 1, so the catch-up reads partition 1 from 0. The tick at 1@3 found processor 1's
    key k1 with nothing due; the snapshot holds k1's window opened after it. Applied again to
    k1, the tick would close that window early (its result never emitted)."""
    app = window_app(tmp_path, partitions=2, initial=1)
    kafka = memory_kafka(4)
    k1, other = keys_in(1, 2, 4, 2)
    k3 = keys_in(3, 2, 4, 1)[0]
    append_record(kafka, 1, k3, 1, at=1_000)
    append_record(kafka, 1, k3, 2, at=2_000)
    append_record(kafka, 1, other, 9, at=1_000)  # where the growth's marker would be
    append_tick(kafka, 1, floor=50_000)  # closes other's window; k3 lives in 3 from here
    append_record(kafka, 1, k1, 3, at=5_000)
    append_record(kafka, 1, k1, 4, at=6_000)  # processor 1's snapshot covers 1 to here
    append_tick(kafka, 1, floor=60_000)  # closes k1's window: mean 3.5
    append_record(kafka, 3, k3, 5, at=3_000)
    append_tick(kafka, 3, floor=30_000)
    history = {TOPIC: TopicHistory.of(TOPIC, (2, 4), {2: 0, 3: 2})}
    oracle = Owner(app, 0, history)
    oracle.process([*stored(kafka, 1), *stored(kafka, 3)])
    emitted = {key for o in oracle.emitted.values() for key, _ in results(o)}
    assert emitted == {k1, k3, other}  # each key's window closed at a tick
    source_1 = Owner(app, 1, history)
    source_1.process(stored(kafka, 1)[:6])
    grown = {"counts": [2, 4], "thresholds": {"2": 0, "3": 2}}
    state = scaled(all_completed(scaled(started("timed", 1, 2), 1, 4, grown)), 2, 1, grown)
    for source in (1, 2, 3):
        state = released(state, source, 0, {source: kafka.broker.partition((TOPIC, source)).end})
    receiver = Owner(app, 0, history).database
    nothing = Owner(app, 2, history).database
    parts = {
        1: (source_1.database, [k1, other], {1: 6}),
        2: (nothing, [], {2: 0, 0: 0}),
        3: (nothing, [], {1: 0, 3: 0}),  # replayed from 0 (``replayed_from_0``)
    }
    build = CopiedBuild(receiver, "catchup-2", parts)
    catch_up(kafka, app, state, 0, receiver, bootstrap=lambda _catchup: build)
    assert source_starts(receiver, "catchup-2", frozenset({1, 3}))[(TOPIC, 1)] == {1: 6, 3: 0}
    keys = [k1, k3, other]
    assert state_of(receiver, keys) == state_of(oracle.database, keys)
