"""Review of branch order-faults (issue 36 §1, faults A-E): reproductions of defects left in
the live canonical order (each ``xfail(strict=True)`` until fixed)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from framework import App, AppConfig, Record
from framework.config import TopicConfig
from framework.coordination.registry import TopicEntry, TopicRegistry
from framework.growth.markers import MarkerName
from framework.kafka import Message, TopicSpec
from framework.runtime.growth_bases import MemoryBases
from framework.runtime.ordering import InputOrder, Taken
from framework.testing import TestDriver
from framework.time.ticks import TickRead, is_tick, read_tick
from rebalance import TopicHistory, key_hash
from statestore import ProcessorDatabase
from tests.clocks import ManualClock
from tests.framework.order import live_world as world
from tests.framework.order.input_order_world import input_order
from tests.framework.order.test_input_order import (
    SHRUNK,
    _commit,
    _drain_marker,
    _growth_marker,
    _marker,
    _record,
    _tick,
)
from tests.framework.order.test_input_order import _world as _order_world
from tests.sim.broker import Broker
from tests.sim.kafka import MemoryKafka

C, V0, V1 = ("clicks", 0), ("views", 0), ("views", 1)
#: views of two partitions from the start
TWO_VIEWS = TopicHistory.of("views", [2])


def test_a_record_behind_a_forced_tick_is_not_released_one_millisecond_per_batch() -> None:
    """A view at 10 ms waits for clicks (idle): a forced tick 11 into clicks releases it and
    then stays in the merge (an errand: nothing waits for it, no tick is forced for it:
    fault C's fix). A view at 1000 ms comes to views[1]. The least head is now the clicks
    errand (11), blocked by views[0] (10): the tick forced is views[0] at 11, read back it
    releases the errand and is the least head itself (11, views), blocked by clicks (needs
    12): clicks gets 12, views[0] 12, ... each floor one above the last, one forced tick a
    batch, until 1001: the view at 1000 waited ~2000 batches (the fault; event times in ms: a
    gap of an hour is millions) and as many ticks were written into the input topics. Forcing
    for the least *wanted* item (floors 1001 into clicks, 11 into views[0] for the clicks
    errand before it) releases it at once."""
    order, _database, clock = _order_world(TWO_VIEWS)
    order.follow({C, V0, V1})
    flowing = {C, V0, V1}
    offsets = {C: 0, V0: 1, V1: 0}
    assert order.take([_record(V0, 0, 10)]) == []
    clock.sleep(1)
    [tick] = order.forced_ticks(flowing)
    assert (tick.topic, tick.partition, tick.floor) == ("clicks", 0, 11)
    released = order.take([_tick(C, 0, 11, forced=True)])
    offsets[C] = 1
    assert [(m.topic(), m.offset()) for m in released] == [("views", 0)]
    assert order.take([_record(V1, 0, 1000)]) == []
    forced = 0
    for _ in range(10):
        clock.sleep(1)
        ticks = order.forced_ticks(flowing)
        forced += len(ticks)
        fetched = []
        for t in ticks:
            position = (t.topic, t.partition)
            fetched.append(_tick(position, offsets[position], t.floor, forced=True))
            offsets[position] += 1
        released = order.take(fetched)
        if any((m.topic(), m.partition()) == V1 for m in released):
            return
    raise AssertionError(f"views[1]@0 (1000 ms) still waits after {forced} forced ticks")


#: clicks grew from 1 partition to 2: clicks[1]'s marker at offset 1 of clicks[0]
GROWN = TopicHistory.of("clicks", [1, 2], {1: 1})
C1 = ("clicks", 1)


def _applied_of_k(order: InputOrder, clock: ManualClock, fetched: list[Taken]) -> list[str]:
    """Take ``fetched``, then force ticks (read back at once) until nothing waits; the
    key ``k``'s records of clicks[1] and views[0] as applied."""
    offsets = {C: 2, C1: 1, V0: 1}
    released = order.take(fetched)
    for _ in range(6):
        clock.sleep(1)
        ticks = order.forced_ticks(set(order._next))
        fetch = []
        for t in ticks:
            position = (t.topic, t.partition)
            fetch.append(_tick(position, offsets[position], t.floor, forced=True))
            offsets[position] += 1
        released += order.take(fetch)
    return [f"{m.topic()}[{m.partition()}]" for m in released if m.key() == b"k"]


def test_a_growth_childs_order_does_not_depend_on_where_its_parent_is_read() -> None:
    """clicks grew: clicks[1]'s life starts at offset 0, its marker at offset 1 of clicks[0],
    where the clicks before it reach 500 ms. Key k's first click in clicks[1] is at 100 ms,
    its view at 300 ms. Canonically the click's mark is max(base 500, 100) = 500: the view
    goes first. A processor reading clicks[0] too (not past the marker) assigns the child
    with its parent (base 500) and applies view, click; a processor that owns clicks[1] and
    views[0] but not clicks[0] (placement: linear hashing puts them apart), or that assigns
    the child after it read clicks[0] past the marker, assigns it at NO_FLOOR
    (``InputOrder._lineage``: "not known here") and applied click, view: the key's state
    depended on which processor computes it. Now the base is recorded (the app's control
    log, here ``bases``): the parent's reader keeps it with the batch that reads past the
    marker and publishes it once committed; the child's reader elsewhere holds the child
    (and what it blocks) until it is recorded."""
    bases = MemoryBases()
    together, database, clock = _order_world(clicks=GROWN, bases=bases)
    together.follow({C, C1, V0})
    parent_records = [_record(C, 0, 500, b"other"), _growth_marker(C, 1, 1)]
    child_records = [_record(C1, 0, 100), _record(V0, 0, 300)]
    apart, _db, apart_clock = _order_world(clicks=GROWN, bases=bases)
    apart.follow({C1, V0})
    assert apart.take(child_records) == []  # (clicks[1] waits for its base; the view for it)

    with_parent = _applied_of_k(together, clock, parent_records + child_records)
    assert bases.bases == {}  # (not committed yet: not published)
    _commit(together, database)
    together.take([])  # (the next batch's take publishes what the state keeps)
    assert bases.bases == {("clicks", 1, 0): 500}
    without_parent = _applied_of_k(apart, apart_clock, [])

    assert with_parent == ["views[0]", "clicks[1]"]  # (canonical)
    assert without_parent == with_parent


def test_a_survivor_held_for_its_deleted_partition_does_not_stall_the_merge() -> None:
    """views shrank 2 -> 1 (``SHRUNK``): views[1] deleted (drain marker at offset 1), views[0]
    its survivor from offset 2 on. views[0] has its own key's view at 50 ms, then (offset 2) a
    view of k, which lived in views[1]: its gate holds views[0] until views[1] is reached
    past its drain marker, by this processor's *state* offset (``Assignment._position``).
    views[1] has k's view at 100 ms; clicks a click at 70 ms. The least head is the click
    (70, input 0): views[0] (50, held: not flowing) must pass 70 first and gets no forced
    tick; views[1]@0 (100) waits behind the click in the merge, so its state offset never
    passes the drain marker and the gate never opens (the fault). Now the survivor, linked to
    views[1] from its hold on (``MergeBuffer.merging``), has ``R`` at least views[1]'s mark
    (100): the click goes, views[1]'s view after a forced tick into clicks."""
    assert SHRUNK.entry_gate(key_hash(b"k"), 0, 2) == (1, 2)  # (views[0]@2 waits on views[1])
    assert SHRUNK.entry_gate(key_hash(b"a"), 0, 1) is None
    order, database, clock = _order_world(SHRUNK)
    order.follow({C, V0, V1})
    flowing = {C, V1}  # (views[0] held at offset 2 by its gate: its record there is cut)
    fetched = [
        _growth_marker(V0, 0, 1),
        _record(V0, 1, 50, b"a"),
        _record(V1, 0, 100),
        _drain_marker(V1, 1),
        _record(C, 0, 70, b"c"),
    ]
    released = order.take(fetched)
    offsets = {C: 1, V0: 2, V1: 2}
    for _ in range(6):
        clock.sleep(1)
        fetch = []
        for t in order.forced_ticks(flowing):
            position = (t.topic, t.partition)
            fetch.append(_tick(position, offsets[position], t.floor, forced=True))
            offsets[position] += 1
        released += order.take(fetch)
    batch_offsets = _commit(order, database)
    assert database.offsets().get(V1, 0) >= 2, (batch_offsets, order._buffer.blocking())


def _views_of_two_app() -> App:
    config = AppConfig.load(
        None,
        app_id="two",
        time={"input_order": "canonical"},
        inputs=[{"topic": "clicks", "partitions": 1}, {"topic": "views", "partitions": 2}],
        outputs=[{"topic": "out", "partitions": 1}],
        initial_processors=1,
    )
    app = App(config)
    app.store("s")

    @app.processor(stores=["s"])
    def count(record: Record[bytes], state: Any) -> None:
        state.set((state.get() or 0) + 1)

    return app


def test_test_driver_advance_time_forces_a_few_ticks_not_one_per_millisecond(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A view at 1000 ms in views[0], then ``advance_time(5)``: the ticks at 5 leave the view
    and views[0]'s tick waiting for clicks; ``_force_waiting`` forced (the fault) clicks 6 for
    views[1]'s tick (5), whose errand is the least head, views[1] 6 for it, clicks 7, ...:
    about 2000 forced ticks, each applied as a batch, before the view goes (an app's times
    in epoch ms: billions, the driver never returns). Now: a few forced ticks."""
    driver = TestDriver(_views_of_two_app())
    forced: list[tuple[str, int, int]] = []
    process = driver._process

    def spy(topic: str, partition: int, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("wanted") is False:
            forced.append((topic, partition, kwargs["timestamp"]))
        process(topic, partition, *args, **kwargs)

    monkeypatch.setattr(driver, "_process", spy)
    driver.send("views", b"k", b"", timestamp=1_000, partition=0)
    driver.advance_time(5)
    assert driver.pending == 0
    assert len(forced) <= 4, (len(forced), forced[:4])


def _views_of_two_kafka() -> MemoryKafka:
    kafka = MemoryKafka(Broker(random.Random(0)), ManualClock())
    kafka.create_topics(
        [
            TopicSpec(world.CLICKS, 1),
            TopicSpec(world.VIEWS, 2),
            TopicSpec(f"{world.APP_ID}-dead-letters", 1),
        ]
    )
    registry = TopicRegistry(kafka)
    registry.ensure_topic()
    registry.register(world.CLICKS, 1)
    registry.register(world.VIEWS, 2)
    return kafka


def _append(kafka: MemoryKafka, position: tuple[str, int], key: bytes, at: int) -> None:
    record = {"key": key, "value": b"", "headers": (), "timestamp_ms": at, "origin": "test"}
    kafka.broker.append(position, record)


def _ticks(kafka: MemoryKafka, position: tuple[str, int]) -> list[int]:
    floors = []
    for record in kafka.broker.records(*position):
        headers = list(record.headers or ())
        if record.key is None and kafka.broker.visible(record) and is_tick(headers):
            read = read_tick(headers)
            if isinstance(read, TickRead):
                floors.append(read.floor)
    return floors


def test_live_a_record_behind_a_forced_tick_waits_for_a_few_forced_ticks(tmp_path: Path) -> None:
    """The first test, run by ``ProcessorRuntime`` on the in-memory Kafka (views of two
    partitions): a view of a (views[0]) at 10 ms is applied after one forced tick into
    clicks; then a view of k (views[1]) at 1000 ms. Forced for the least head (the fault),
    it was applied only after about 2000 forced ticks (clicks 12, 13, ... and views[0] 11,
    12, ...), one per batch; forced for the least item waited for, after a few."""
    kafka = _views_of_two_kafka()
    settings = world.config(tmp_path, "canonical").model_copy(
        update={
            "inputs": [
                TopicConfig(topic=world.CLICKS, partitions=1),
                TopicConfig(topic=world.VIEWS, partitions=2),
            ]
        }
    )
    run = world.Run(world.make_app(settings), kafka)
    _append(kafka, V0, b"a", 10)
    run.until({b"a": 1}, seconds=30)
    assert run.applied([b"a"]) == [["views@0"]]
    _append(kafka, V1, b"k", 1_000)
    run.until({b"k": 1}, seconds=30)
    forced = _ticks(kafka, C) + _ticks(kafka, V0) + _ticks(kafka, V1)
    assert run.applied([b"k"]) == [["views@0"]], len(forced)
    assert len(forced) <= 4, (len(forced), forced[:6])


#: clicks grew 1 -> 2 -> 4: clicks[1]'s marker at offset 1 of clicks[0], clicks[3]'s at
#: offset 0 of clicks[1] (the second growth came before this processor read clicks[0] far)
GROWN_TWICE = TopicHistory.of("clicks", [1, 2, 4], {1: 1, 2: 2, 3: 0})


def _input_order(database: ProcessorDatabase | None = None) -> tuple[InputOrder, ManualClock]:
    """An ``InputOrder`` of clicks (``GROWN_TWICE``) and views (one partition) over
    ``database`` (a restart: the same one) or a new one."""
    entries = {
        "views": TopicEntry(TopicHistory.of("views", [1])),
        "clicks": TopicEntry(GROWN_TWICE),
    }
    order, _, clock = input_order(entries, database)
    order.follow({C, C1, V0})
    return order, clock


def test_a_growth_childs_base_survives_a_restart_before_its_parent_reaches_the_marker() -> None:
    """clicks[1] (child of clicks[0], marker at offset 1 there) starts with clicks[3]'s growth
    marker (offset 0; a marker never waits for a gate). It is released at once and the batch
    commits clicks[1] at 1 with its mark NO_FLOOR, clicks[0] not read past the marker yet.
    Run on: the parent's click at 500 and its marker give clicks[1] the base 500, so k's
    click (100, clicks[1]@1) has mark 500 and k's view (300) goes first. Restarted from that
    commit: clicks[1] resumes at offset 1, "past its life's start" (``InputOrder._lineage``),
    so it was assigned without its parent, at the stored NO_FLOOR: k's click went first.
    Now nothing of a child is released before its base is known, so it is not committed
    past its life's start before: a restart reads it from there and finds its base again."""
    parent_records = [_record(C, 0, 500, b"other"), _growth_marker(C, 1, 1)]
    child_records = [_record(C1, 1, 100), _record(V0, 0, 300)]
    first = [_marker(C1, 0, MarkerName(4, 3, 1))]

    def order_of_k(order: InputOrder, clock: ManualClock) -> list[str]:
        offsets = {C: 2, C1: 2, V0: 1}
        released = order.take(parent_records + child_records)
        for _ in range(6):
            clock.sleep(1)
            fetch = []
            for t in order.forced_ticks(set(order._next)):
                position = (t.topic, t.partition)
                fetch.append(_tick(position, offsets[position], t.floor, forced=True))
                offsets[position] += 1
            released += order.take(fetch)
        return [f"{m.topic()}[{m.partition()}]" for m in released if m.key() == b"k"]

    running, clock = _input_order()
    assert running.take(first) == []  # (held: its base is not known yet)
    database = running._database
    assert _commit(running, database)[C1] == 0
    ran_on = order_of_k(running, clock)

    restarted, clock = _input_order(database)
    after_restart = order_of_k(restarted, clock)
    assert ran_on == ["views[0]", "clicks[1]"]  # (canonical: the click's mark is 500)
    assert after_restart == ran_on


def _where_of(messages: list[Message]) -> list[tuple[str | None, int | None, int | None]]:
    return [(m.topic(), m.partition(), m.offset()) for m in messages]


def test_a_rewind_does_not_turn_a_forced_tick_into_one_that_is_waited_for() -> None:
    """A click at 10 ms waits for views (idle): a forced tick 10 into views releases it, and
    stays in the merge as an errand (nothing waits for it: no more ticks are forced). The
    batch commits. Then a batch is dropped (an aborted transaction): ``rewind`` reads views
    again from its state offset, before the errand. ``dropped`` cleared the errands, so read
    again the forced tick was taken for a tick something waits for and clicks got a forced
    tick 11 for it (the fault); the offsets of forced ticks read are kept now. (After a
    restart a forced tick says so itself: ``test_forced_tick_format``.)"""
    order, database, clock = _order_world()
    order.take([_record(C, 0, 10)])
    clock.sleep(1)
    [tick] = order.forced_ticks({C, V0})
    assert (tick.topic, tick.floor) == ("views", 10)
    assert [m.topic() for m in order.take([_tick(V0, 0, 10, forced=True)])] == ["clicks"]
    assert _commit(order, database) == {C: 1, V0: 0}  # (views stays before its errand)
    clock.sleep(1)
    assert order.forced_ticks({C, V0}) == []
    order.rewind()
    assert order.take([_tick(V0, 0, 10, forced=True)]) == []
    clock.sleep(1)
    assert order.forced_ticks({C, V0}) == []
