"""Each input partition's floor (the largest event time read there) is kept in the state with
the batch that read it, so a restarted processor writes the tick it would have written:
never covering a batch that did not commit, and knowing what its catch-up read."""

from __future__ import annotations

from pathlib import Path

from framework.coordination.registry import TopicEntry
from framework.processing import RecordProcessor, StoredMessage
from framework.runtime.ticking import Tick, TickWriter
from framework.time.applying import FLOOR_SCOPE
from framework.time.ticks import tick_headers
from rebalance import TopicHistory
from statestore import DatabaseIdentity, ProcessorDatabase
from tests.clocks import ManualClock
from tests.framework import time_world as world
from tests.framework.test_review_time2_ticks import (
    NOW,
    T0,
    TOPIC,
    _database,
    _Layout,
    _Processor,
    _Reading,
    _same_partition,
    minute_app,
)

#: the catch-up world's input topic, one partition count
TOPIC_IN = world.TOPIC
FLAT = {"counts": [2], "thresholds": {}}


def _ticks(processor: _Processor, looks: int = 3) -> list[Tick]:
    """The ticks ``processor`` writes in ``looks`` looks a second apart, each read back."""
    ticks = []
    for _ in range(looks):
        for tick in processor.decide(after=1.0):
            processor.read(tick)
            ticks.append(tick)
    return ticks


def test_a_batch_dropped_uncommitted_leaves_no_floor_and_its_rereading_keeps_one() -> None:
    """Key ``a``'s minute is open; a batch reads ``b`` at T0 + 2 min but is dropped (its
    transaction aborted: ``TickWriter.dropped``). Until ``b`` is read again no tick may
    claim its time; read again and committed, a restart knows it. (Without the floors taken
    back from the state at the drop, the first look ticked at T0 + 2 min, and ``b`` read
    again raised no floor, so none was written with it and a restart forgot it.)"""
    app = minute_app()
    database = _database(app)
    a, b = _same_partition(0)[:2]
    clock = ManualClock(NOW)
    processor = _Processor(app, database, clock)
    processor.send(a, T0, 0)
    batch = database.begin()
    dropped = StoredMessage(TOPIC, 0, 1, b, b"", T0 + 120_000, [])
    assert processor.records.process(batch, dropped)[1] is None
    batch.abort()
    processor.writer.dropped()
    assert processor.decide(after=1.0) == []  # the floor covers no batch that did not commit
    processor.send(b, T0 + 120_000, 0)  # read again
    restarted = _Processor(app, database, clock)
    assert [tick.floor for tick in _ticks(restarted)] == [T0 + 120_000]


def test_a_receiver_restarted_after_its_catch_up_ticks_what_the_catch_up_read(
    tmp_path: Path,
) -> None:
    """Scale 1 -> 2: processor 1 gains partition 1 at F. Its catch-up read ``a``'s record
    (its window [0, 10 s) closes at 11 s) and ``b``'s at 15 s; no record comes any more.
    Running on, processor 1 ticks floor 15 s there (its catch-up shares what it read);
    restarted before its first look, it must too (was: no floor, no tick, ``a``'s window
    open for ever)."""
    app = world.window_app(tmp_path, partitions=2, initial=1)
    kafka = world.memory_kafka(2)
    a, b = world.keys_in(1, 2, 2, 2)
    world.append_record(kafka, 1, a, 1, at=1_000)
    final = world.append_record(kafka, 1, b, 2, at=15_000) + 1
    state = world.started("timed", 1, 2).apply(
        {"type": "scale", "generation": 1, "processors": 2, "partitions": {TOPIC_IN: 2},
         "histories": {TOPIC_IN: FLAT}}
    )  # fmt: skip
    state = world.released(state, 0, 1, {1: final})
    receiver = ProcessorDatabase.in_memory(
        DatabaseIdentity("timed", 1, {"initial_processors": 1}), app.store_specs()
    )
    world.catch_up(kafka, app, state, 1, receiver)
    batch = receiver.begin()  # it takes partition 1 over at F
    batch.set_offset(TOPIC_IN, 1, final)
    batch.commit()
    history = TopicHistory.of(TOPIC_IN, [2])
    records = RecordProcessor(app, {TOPIC_IN: 2}, histories={TOPIC_IN: history})  # restarted
    reading = _Reading(_Layout({TOPIC_IN: TopicEntry(history)}), {(TOPIC_IN, 1)})
    writer = TickWriter.of(app.config.time, records, reading, receiver, ManualClock(NOW))
    assert writer is not None
    looked = receiver.begin()
    ticks = writer.decide(looked, {})
    looked.abort()
    assert [(tick.partition, tick.floor) for tick in ticks] == [(1, 15_000)]
    message = StoredMessage(TOPIC_IN, 1, final, None, b"", 0, list(tick_headers(15_000, 0)))
    batch = receiver.begin()
    outputs, dead = records.process(batch, message)
    batch.commit()
    assert dead is None and [o.key for o in outputs] == [a]  # a's window closed


def test_a_catch_up_never_writes_back_a_floor_below_the_one_the_state_holds(
    tmp_path: Path,
) -> None:
    """Processor 1 read partition 1 to a floor of 50 s when it owned it before (the state
    holds it); gaining it again, its catch-up reads the records at 1 s and 15 s first, before
    the processor's loop ran a batch. Those raise no floor above 50 s: none is written (was:
    the catch-up started from no floor and wrote 15 s over 50 s)."""
    app = world.window_app(tmp_path, partitions=2, initial=1)
    kafka = world.memory_kafka(2)
    a, b = world.keys_in(1, 2, 2, 2)
    world.append_record(kafka, 1, a, 1, at=1_000)
    final = world.append_record(kafka, 1, b, 2, at=15_000) + 1
    state = world.started("timed", 1, 2).apply(
        {"type": "scale", "generation": 1, "processors": 2, "partitions": {TOPIC_IN: 2},
         "histories": {TOPIC_IN: FLAT}}
    )  # fmt: skip
    state = world.released(state, 0, 1, {1: final})
    receiver = ProcessorDatabase.in_memory(
        DatabaseIdentity("timed", 1, {"initial_processors": 1}), app.store_specs()
    )
    batch = receiver.begin()
    batch.set_progress(FLOOR_SCOPE, TOPIC_IN, 1, 50_000)
    batch.commit()
    world.catch_up(kafka, app, state, 1, receiver)
    assert receiver.progress(FLOOR_SCOPE) == {(TOPIC_IN, 1): 50_000}
