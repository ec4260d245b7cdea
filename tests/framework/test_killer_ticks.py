"""A tick whose window result (or timer) kills the process, in the runtime and a catch-up.

Only the item that kills is dropped, after ``crash_limit`` deaths on it, as failed: a dead
letter (stage ``window`` or ``timer``), its function not run; the tick applies to every other
key, and to the killer's key without it, by the owner and by a receiver that gains the key
alike (``framework.runtime.tick_guard``). The runtime runs for real on the in-memory Kafka;
a death is ``time_world.Died`` escaping the run, a restart a new run over the same state.
"""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from framework import App, AppConfig, BatchConfig, KafkaConfig, Record, Timer
from framework.config import TopicConfig
from framework.config_time import TimeConfig
from framework.coordination.registry import TopicRegistry
from framework.kafka import TopicSpec
from framework.ops.status import AppStatus
from framework.ops.status_view import render_status
from framework.processing import ProcessorStoppedError, RecordProcessor, StoredMessage
from framework.runtime.crashes import CrashGuard, SkippedRecord, skipped_records
from framework.runtime.loop import ProcessorRuntime, RuntimeStats
from framework.runtime.tick_guard import guarded_tick
from framework.time.ticks import tick_headers
from statestore import DatabaseIdentity, ProcessorDatabase, processor_path
from tests.clocks import ManualClock
from tests.framework import time_world as world
from tests.framework.time_world import GRACE, OUT, SIZE, TOPIC, Died
from tests.sim.broker import Broker
from tests.sim.kafka import MemoryKafka

LIMIT = 2


def runtime_world(tmp_path: Path, killer: bytes) -> tuple[MemoryKafka, AppConfig]:
    """The in-memory Kafka with the app's topics and registry entries, and its config:
    one processor, crash_limit ``LIMIT``, ticks considered every 50 ms."""
    kafka = MemoryKafka(Broker(random.Random(0)), ManualClock())
    config = AppConfig(
        app_id="killer-ticks",
        kafka=KafkaConfig(bootstrap_servers="simulated:9092"),
        inputs=[TopicConfig(topic=TOPIC, partitions=2)],
        outputs=[TopicConfig(topic=OUT, partitions=2)],
        initial_processors=1,
        state_dir=tmp_path,
        crash_limit=LIMIT,
        batch=BatchConfig(max_records=5, max_wait_ms=20),
        time=TimeConfig(tick_interval=timedelta(milliseconds=50)),
    )
    kafka.create_topics([TopicSpec(TOPIC, 2), TopicSpec(OUT, 2), TopicSpec(config.dead_letters, 1)])
    registry = TopicRegistry(kafka)
    registry.ensure_topic()
    registry.register(TOPIC, 2)
    registry.register(OUT, 2)
    return kafka, config


def _values(kafka: MemoryKafka, topic: str, partitions: int) -> list[tuple[bytes | None, bytes]]:
    broker = kafka.broker
    return [
        (r.key, r.value or b"")
        for p in range(partitions)
        for r in broker.records(topic, p)
        if broker.visible(r)
    ]


def test_the_runtime_drops_the_killing_window_and_applies_its_tick_to_every_key(
    tmp_path: Path,
) -> None:
    """Keys ``stays`` and ``moves`` open a window each in partition 0, then a record of
    ``other`` moves the partition's floor past both: the processor's own tick closes them,
    and ``stays``'s result kills it each time. After a death amid nothing watched (the tick
    read alone) and ``crash_limit`` watched deaths, ``stays``'s window is dropped (a dead
    letter, stage window), ``moves``'s result is emitted, and nothing stays due to kill the
    next tick. (Was: the tick was skipped for both keys, both stayed due, the next tick
    killed it again, for ever.)"""
    stays, moves, other = world.keys_in(0, 2, 2, 3)
    kafka, config = runtime_world(tmp_path, stays)
    app = world.windowed(config, killer=stays)
    world.append_record(kafka, 0, stays, 1, at=1_000)
    world.append_record(kafka, 0, moves, 2, at=2_000)
    world.append_record(kafka, 0, other, 3, at=SIZE + GRACE + 9_000)

    def done(_stats: RuntimeStats) -> bool:
        return any(key == moves for key, _ in _values(kafka, OUT, 2))

    deaths = 0
    for _run in range(4 + LIMIT):
        try:
            ProcessorRuntime(app, 0, kafka=kafka).run(until=done)
            break
        except Died:
            deaths += 1
    assert deaths == 1 + LIMIT
    assert [orjson.loads(v) for k, v in _values(kafka, OUT, 2) if k == moves] == [
        {"start": 0, "end": SIZE, "value": 2.0}
    ]
    assert not any(key == stays for key, _ in _values(kafka, OUT, 2))
    letters = [r for r in kafka.broker.records(config.dead_letters, 0) if kafka.broker.visible(r)]
    assert [r.key for r in letters] == [stays]
    headers = dict(letters[0].headers or ())
    assert headers.get("splitstate.stage") == b"window", headers
    database = ProcessorDatabase.open_read_only(processor_path(config.app_state_dir, 0))
    try:
        [skipped] = skipped_records(database)
        assert skipped.keys == (stays,) and skipped.crashes == LIMIT
        assert database.get("splitstate.due", stays) is None  # nothing left to kill a tick
    finally:
        database.close()


FLAT = {"counts": [2], "thresholds": {}}


def test_a_receiver_gaining_the_killer_drops_the_same_item_as_its_owner(
    tmp_path: Path,
) -> None:
    """Scale 1 -> 2: processor 1 gains partition 1, where a tick closes the windows of
    ``killer`` and ``fine``. The owner died on ``killer``'s result ``crash_limit`` times and
    dropped that window; the receiver's catch-up dies on it too (once amid its first batch,
    then ``crash_limit`` times on the tick alone, watched) and drops the same window: both
    keys' state equals the owner's at F."""
    killer, fine = world.keys_in(1, 2, 2, 2)
    app = world.window_app(tmp_path, partitions=2, initial=1, killer=killer)
    kafka = world.memory_kafka(2)
    world.append_record(kafka, 1, killer, 1, at=1_000)
    world.append_record(kafka, 1, fine, 2, at=2_000)
    world.append_tick(kafka, 1, floor=SIZE + GRACE + 1)
    final = world.append_record(kafka, 1, fine, 5, at=SIZE + 3_000) + 1
    owner = world.Owner(app, 0)
    owner_deaths, letters = owner.process_careful(world.stored(kafka, 1))
    assert owner_deaths == app.config.crash_limit
    assert [(letter.key, letter.stage) for letter in letters] == [(killer, "window")]
    state = world.started("timed", 1, 2).apply(
        {"type": "scale", "generation": 1, "processors": 2, "partitions": {TOPIC: 2},
         "histories": {TOPIC: FLAT}}
    )  # fmt: skip
    state = world.released(state, 0, 1, {1: final})
    receiver = ProcessorDatabase.in_memory(
        DatabaseIdentity("timed", 1, {"initial_processors": 1}), app.store_specs()
    )
    deaths = 0
    for _run in range(10):
        try:
            world.catch_up(kafka, app, state, 1, receiver)
            break
        except Died:
            deaths += 1
    assert deaths == 1 + app.config.crash_limit
    keys = [killer, fine]
    expected = world.state_of(owner.database, keys)
    assert expected["splitstate.time"].keys() == {killer, fine}
    assert world.state_of(receiver, keys) == expected
    assert [s.keys for s in skipped_records(receiver)] == [(killer,)]


def _tick_app_world(tmp_path: Path, on_error: str = "dead-letter") -> tuple[object, ...]:
    killer = world.keys_in(0, 2, 2, 1)[0]
    config = world.window_app(tmp_path, partitions=2, initial=1, killer=killer).config
    app = world.windowed(config.model_copy(update={"on_error": on_error}), killer=killer)
    database = ProcessorDatabase.in_memory(
        DatabaseIdentity("timed", 0, {"initial_processors": 1}), app.store_specs()
    )
    records = RecordProcessor(app, {TOPIC: 2})
    batch = database.begin()
    stamped = StoredMessage(TOPIC, 0, 0, killer, b"1", 1_000, [])
    assert records.process(batch, stamped)[1] is None
    batch.set_offset(TOPIC, 0, 1)
    batch.commit()
    headers: list[tuple[str, bytes | None]] = list(tick_headers(SIZE + GRACE, 0))
    tick = StoredMessage(TOPIC, 0, 1, None, b"", 0, headers)
    return app, database, records, tick, killer


def test_with_on_error_stop_the_killing_item_stops_the_processor_naming_it(
    tmp_path: Path,
) -> None:
    _app, database, records, tick, killer = _tick_app_world(tmp_path, "stop")
    assert isinstance(database, ProcessorDatabase) and isinstance(records, RecordProcessor)
    assert isinstance(tick, StoredMessage)
    where = (TOPIC, 0, 1)
    for _death in range(LIMIT):
        guard = CrashGuard(database, LIMIT, 0, clock=ManualClock())
        guard.attempt({(TOPIC, 0): [1, 1]}, {where})
        with pytest.raises(Died):
            guarded_tick(guard, records, database.begin(), tick, where, restore=False, keys=None)
    guard = CrashGuard(database, LIMIT, 0, clock=ManualClock())
    guard.attempt({(TOPIC, 0): [1, 1]}, {where})
    with pytest.raises(ProcessorStoppedError, match="on_error: dead-letter") as stopped:
        guarded_tick(guard, records, database.begin(), tick, where, restore=False, keys=None)
    assert f"for key {killer!r}" in str(stopped.value)
    assert "killed the processor 2 times at the tick in[0]@1" in str(stopped.value)


def test_deaths_while_no_item_fired_stop_the_processor_rather_than_skip_the_tick(
    tmp_path: Path,
) -> None:
    """A death while the tick was watched but none of its items fired (it died working out
    which keys the tick makes due) is no key's: after ``crash_limit`` of those the tick is
    not skipped (its readers would differ), the processor stops, saying why."""
    _app, database, records, tick, _killer = _tick_app_world(tmp_path)
    assert isinstance(database, ProcessorDatabase) and isinstance(records, RecordProcessor)
    assert isinstance(tick, StoredMessage)
    where = (TOPIC, 0, 1)
    for _death in range(LIMIT):
        guard = CrashGuard(database, LIMIT, 0, clock=ManualClock())
        guard.attempt({(TOPIC, 0): [1, 1]}, {where})
        guard.watch((TOPIC, 0), None)  # (as guarded_tick does first) and dies here
    guard = CrashGuard(database, LIMIT, 0, clock=ManualClock())
    assert guard.tick_deaths(*where).outside == LIMIT
    with pytest.raises(ProcessorStoppedError, match="while none of its timers"):
        guarded_tick(guard, records, database.begin(), tick, where, restore=False, keys=None)


def test_a_lone_tick_that_dies_unwatched_counts_against_nothing() -> None:
    """A tick read alone outside careful mode is not watched: its death names no item, and
    (unlike a lone record's) counts against no record either; with ``crash_limit`` 1 the
    tick is then watched, not skipped whole."""
    database = ProcessorDatabase.in_memory(DatabaseIdentity("crashes", 0), [])
    where = ("t", 0, 7)
    CrashGuard(database, 1, 0, clock=ManualClock()).attempt({("t", 0): [7, 7]}, {where})
    after = CrashGuard(database, 1, 0, clock=ManualClock())
    assert after.careful({("t", 0)})
    assert after.crashes(*where) == 0
    assert after.tick_deaths(*where).items == {} and after.tick_deaths(*where).outside == 0
    CrashGuard(database, 1, 0, clock=ManualClock()).attempt({("t", 0): [7, 7]})  # a record's
    assert CrashGuard(database, 1, 0, clock=ManualClock()).crashes(*where) == 1


def test_a_killing_timer_is_dropped_its_writes_never_made_and_other_keys_fire(
    tmp_path: Path,
) -> None:
    """Each key's event sets a reminder a second later; ``killer``'s reminder function kills
    the process. At the tick after ``crash_limit`` deaths it is dropped as a failed timer
    (stage timer), its function not run: ``killer``'s count stays, its timer is gone, and
    ``fine``'s reminder runs."""
    killer, fine = world.keys_in(0, 2, 2, 2)
    app = App(world.window_app(tmp_path, partitions=2, initial=1).config)
    app.store("count", int)

    @app.timer("remind", stores=["count"])
    def remind(timer: Timer, count: Any) -> None:
        if timer.key == killer:
            raise Died("the reminder")
        count.set(-1)

    @app.processor(stores=["count", "remind"])
    def event(record: Record[bytes], stores: dict[str, Any]) -> None:
        stores["count"].set(stores["count"].get(0) + 1)
        stores["remind"].set_after(1_000, "r")

    kafka = world.memory_kafka(2)
    world.append_record(kafka, 0, killer, 1, at=1_000)
    world.append_record(kafka, 0, fine, 2, at=1_000)
    world.append_tick(kafka, 0, floor=5_000)
    owner = world.Owner(app, 0)
    deaths, letters = owner.process_careful(world.stored(kafka, 0))
    assert deaths == app.config.crash_limit
    [letter] = letters
    assert (letter.key, letter.stage) == (killer, "timer")
    assert "killed the processor 3 times at the tick in[0]@2" in letter.reason
    assert owner.database.get("count", killer) == 1 and owner.database.get("count", fine) == -1
    assert owner.database.get("splitstate.due", killer) is None


def test_status_says_a_ticks_items_were_dropped_not_a_record_skipped() -> None:
    skipped = [SkippedRecord(TOPIC, 0, 7, 3, 1.0), SkippedRecord(TOPIC, 1, 9, 3, 2.0, (b"k", b"j"))]
    status = AppStatus("killer-ticks", 0, 1, [], {TOPIC: [2]}, skipped={0: skipped})
    text = render_status(status)
    assert "processor 0 skipped in[0]@7: it killed the processor 3 times" in text
    assert (
        "processor 0 dropped 2 key(s)' timer or window result at the tick in[1]@9: it killed "
        "the processor 3 times (see the dead-letter topic, stages timer and window)"
    ) in text
