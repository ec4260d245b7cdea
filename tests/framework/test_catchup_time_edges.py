"""Ticks at the handoff's edge: a tick just before F is the old owner's (applied and emitted in
its last batch, before it released); one exactly at F is the receiver's (it applies the
partition live from F). Whichever way the receiver built its state (replay, or a snapshot
that covers the partition to F - 1 or to F), and whether it read past T1 before the release,
and whether the old owner is gone after the release: every window result is emitted once,
by the owner of the key at that position, and the receiver ends with the oracle's state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.clocks import ManualClock
from tests.framework.time_world import (
    TOPIC,
    CopiedBuild,
    Owner,
    append_record,
    append_tick,
    begin_catch_up,
    keys_in,
    memory_kafka,
    read_to_f,
    released,
    results,
    scaled,
    started,
    state_of,
    stored,
    window_app,
)
from tests.sim.kafka import MemoryKafka

FLAT = {"counts": [2], "thresholds": {}}


def edge_world(tick_at_f: bool) -> tuple[MemoryKafka, list[bytes], int]:
    """Partition 1 (moving from processor 0 to 1 in a scale 1 -> 2): three keys' readings,
    then the tick closing their first windows just before F or exactly at F, then more; the
    keys and F."""
    kafka = memory_kafka(2)
    keys = keys_in(1, 2, 2, 3)
    for i, key in enumerate(keys):
        append_record(kafka, 1, key, i + 1, at=1_000 * (i + 1))
        append_record(kafka, 1, key, 10 * (i + 1), at=12_000 + 1_000 * i)
    closing = append_tick(kafka, 1, floor=30_000)  # closes every key's two windows
    final = closing if tick_at_f else closing + 1
    for i, key in enumerate(keys):
        append_record(kafka, 1, key, 100 + i, at=31_000)
        append_record(kafka, 1, key, 7, at=5_000)  # late: its window closed at the tick
    append_tick(kafka, 1, floor=60_000)
    return kafka, keys, final


@pytest.mark.parametrize("tick_at_f", [False, True], ids=["tick at F-1", "tick at F"])
@pytest.mark.parametrize("covers", [None, -1, 0], ids=["replay", "snapshot to F-1", "to F"])
@pytest.mark.parametrize("read_ahead", [False, True], ids=["T1 = F", "read past T1 first"])
def test_the_ticks_around_f_are_emitted_once_by_the_owner_at_their_position(
    tmp_path: Path, tick_at_f: bool, covers: int | None, read_ahead: bool
) -> None:
    app = window_app(tmp_path, partitions=2, initial=1)
    kafka, keys, final = edge_world(tick_at_f)
    messages = stored(kafka, 1)
    oracle = Owner(app, 0)
    oracle.process(messages)
    assert sum(len(o) for o in oracle.emitted.values()) == 9  # 3 keys, 3 windows each
    source = Owner(app, 0)
    source.process(messages[:final])  # its last batch ends at F; it releases, then dies
    receiver = Owner(app, 1)
    options: dict[str, Any] = {}
    if covers is not None:  # the source's snapshot covers partition 1 to F + covers
        snapshot = Owner(app, 0)
        snapshot.process(messages[: final + covers])
        parts = {0: (snapshot.database, keys, {1: final + covers})}
        build = CopiedBuild(receiver.database, "catchup-1", parts)
        options["bootstrap"] = lambda _catchup: build
    state = released(scaled(started("timed", 1, 2), 1, 2, FLAT), 0, 1, {1: final})
    # T1: the old owner's commits, F at most (and at least what its snapshot covers); below
    # F, the receiver reads on past T1 (and past F) before the release comes
    t1 = (final - 3 if covers is None else final + covers) if read_ahead else final
    kafka.broker.groups["timed"] = {(TOPIC, 1): t1}
    catchup = begin_catch_up(kafka, app, state, 1, receiver.database, **options)
    clock = kafka.clock
    assert isinstance(clock, ManualClock)
    for _ in range(5):
        catchup.step(4)
        clock.now += 1
    assert catchup.positions[(TOPIC, 1)] == t1
    read_to_f(kafka, app, state, catchup)
    catchup.complete(state.scaling.handoffs[(0, 1)])  # type: ignore[union-attr]
    assert receiver.database.offsets() == {(TOPIC, 1): final}
    receiver.process(messages[final:])  # live from F
    assert source.emitted.keys().isdisjoint(receiver.emitted)
    emitted = {at: results(e) for at, e in {**source.emitted, **receiver.emitted}.items()}
    assert emitted == {at: results(e) for at, e in oracle.emitted.items()}
    assert ((1, final) in receiver.emitted) is tick_at_f  # the closing tick's owner emits it
    assert state_of(receiver.database, keys) == state_of(oracle.database, keys)
