"""Review of branch order2 (issue 36 §1): reproductions of defects found in the live
canonical order (each ``xfail(strict=True)`` until fixed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pytest

from framework import App, Record
from framework.runtime.forced_ticks import send_forced
from framework.runtime.loop import ProcessorRuntime, RuntimeStats
from framework.runtime.ticking import Tick
from framework.testing import TestDriver
from rebalance import TopicHistory
from tests.framework.order import live_world as world
from tests.framework.order.live_world import CLICKS, VIEWS
from tests.framework.order.test_input_order import (
    SHRUNK,
    _drain_marker,
    _growth_marker,
    _record,
    _tick,
)
from tests.framework.order.test_input_order import _world as _order_world
from tests.framework.time.apps import emitted
from tests.framework.time.test_review_topic_interleaving import make_app
from tests.sim.kafka import MemoryKafka

C0, V0 = (CLICKS, 0), (VIEWS, 0)
#: clicks grew from 1 partition to 2: clicks[1]'s marker at offset 1 of clicks[0]
GROWN = TopicHistory.of(CLICKS, [1, 2], {1: 1})
_tick_record = _tick


def test_idle_inputs_do_not_get_forced_ticks_for_ever(tmp_path: Path) -> None:
    """One click (10 ms) and one view (20 ms), then nothing. Both records are applied after
    one forced tick; then both inputs are idle, and nothing waits but forced ticks
    themselves. A tick waiting in the merge is a head like a record: the clicks tick (21)
    waits for views to reach 21, views gets a forced tick 21, which waits for clicks to pass
    21, clicks gets 22, ... one per batch, for as long as the inputs stay idle."""
    kafka = world.memory_kafka()
    world.append(kafka, CLICKS, b"k", 10)
    world.append(kafka, VIEWS, b"k", 20)
    app = world.make_app(world.config(tmp_path, "canonical"))

    clock = kafka.clock
    deadline = clock.monotonic() + 60  # (60 waits of the inputs staying idle)

    def done(_stats: RuntimeStats) -> bool:
        return clock.monotonic() > deadline

    ProcessorRuntime(app, 0, kafka=kafka).run(until=done)
    run = world.Run(app, kafka)
    assert run.applied([b"k"]) == [world.canonical(kafka, b"k")]
    forced = world.forced_ticks(kafka, CLICKS) + world.forced_ticks(kafka, VIEWS)
    assert len(forced) <= 2, (world.forced_ticks(kafka, CLICKS), world.forced_ticks(kafka, VIEWS))


class _Died(BaseException):
    """The process died in the function (as a segfault or an OOM kill would end it)."""


def _poisoned_app(tmp_path: Path, order: str, crash_limit: int = 3) -> App:
    settings = world.config(tmp_path, order, in_flight=1)  # type: ignore[arg-type]
    settings = settings.model_copy(update={"crash_limit": crash_limit})
    app = App(settings)
    app.store("seen")

    @app.processor(stores=["seen"])
    def see(record: Record[bytes], state: Any) -> None:
        if record.value == b"boom":
            raise _Died(f"{record.topic}@{record.offset}")
        state.set([*(state.get() or []), f"{record.topic}@{record.offset}"])

    return app


def _append(kafka: MemoryKafka, topic: str, at: int, value: bytes = b"") -> None:
    record = {"key": b"k", "value": value, "headers": (), "timestamp_ms": at, "origin": "test"}
    kafka.broker.append((topic, 0), record)


@pytest.mark.parametrize(
    ("order", "limit"),
    [
        ("arrival", 3),
        ("canonical", 3),
        ("arrival", 1),
        ("canonical", 1),
    ],
)
def test_a_record_that_kills_the_processor_is_skipped_alone_after_crash_limit(
    tmp_path: Path, order: str, limit: int
) -> None:
    """clicks@1 kills the process each time its function runs (crash_limit 3). While suspects
    remain the runtime polls one record per batch so that a death names its record; with
    ``canonical`` the merge still releases several records at once (clicks@0 and clicks@1
    wait for views@0, then go together), a death amid several records names none, and the
    processor dies on restart after restart (with arrival, the poison is skipped after
    1 + 3 deaths)."""
    kafka = world.memory_kafka()
    _append(kafka, CLICKS, 10)
    _append(kafka, CLICKS, 30, b"boom")
    _append(kafka, VIEWS, 40)
    _append(kafka, CLICKS, 50)
    _append(kafka, VIEWS, 60)
    app = _poisoned_app(tmp_path, order, limit)
    run = world.Run(app, kafka)
    deaths = 0
    for _ in range(8):
        try:
            run.until({b"k": 4})
            break
        except _Died:
            deaths += 1
    [applied] = run.applied([b"k"])
    assert sorted(applied) == ["clicks@0", "clicks@2", "views@0", "views@1"], (deaths, applied)
    assert deaths == 1 + limit  # (the first death, amid a batch of several, names none)


def test_a_drained_deleted_partition_does_not_hold_the_other_input_for_ever() -> None:
    """views shrank from 2 partitions to 1: views[1] is deleted, drained (its last record at
    5 ms, then its drain marker), and stays in the processor's universe (``state.owned``:
    deleted partitions too), so the merge keeps it. A click at 10 ms needs every views
    partition at 10 or more; views[0] gets there, views[1] never would, and no forced tick
    is written into a deleted partition (0370e67): the click waited for ever, until a
    deleted partition read past its drain marker was closed (``MergeBuffer.close``)."""
    order, _database, _clock = _order_world(SHRUNK)
    d = (VIEWS, 1)
    order.follow({C0, V0, d})
    fetched = [_growth_marker(V0, 0, 1), _record(d, 0, 5), _record(C0, 0, 10), _record(V0, 1, 20)]
    released = order.take(fetched)
    where = [(m.topic(), m.partition(), m.offset()) for m in released]
    assert where == [(VIEWS, 0, 0), (VIEWS, 1, 0), (CLICKS, 0, 0)], order._buffer.blocking()
    # (its keys' records end before its drain marker; the marker itself still goes through)
    released = order.take([_drain_marker(d, 1)])
    assert [(m.topic(), m.partition(), m.offset()) for m in released] == [(VIEWS, 1, 1)]


def test_a_gate_held_child_does_not_stop_the_forced_ticks_its_parent_needs() -> None:
    """clicks grew: clicks[1] is a child of clicks[0] (its marker at offset 1 there), held by
    its gate (not flowing) until clicks[0]'s state offset passes the marker. views is quiet
    with a view at 20 ms; clicks[0] has a click at 30 ms before its marker. The least head
    is the view (20). Assigned at NO_FLOOR (no base from its parent), the held child alone
    blocked it, no tick was forced anywhere (not into a held partition), the click was
    never applied, clicks[0]'s offset never passed the marker, and the child's gate never
    opened. Assigned with its parent (``MergeBuffer.assign(parent=...)``), the child's
    ``R`` is at least its parent's mark (30): the view goes, then the click after one
    forced tick into views."""
    order, _database, clock = _order_world(clicks=GROWN)
    child = (CLICKS, 1)
    order.follow({C0, child, V0})
    flowing = {C0, V0}  # (the child is held by its gate)
    released = order.take([_record(V0, 0, 20), _record(C0, 0, 30)])
    assert [(m.topic(), m.offset()) for m in released] == [(VIEWS, 0)]
    for _ in range(5):
        clock.sleep(2)
        ticks = order.forced_ticks(flowing)
        released = order.take([_tick_record((t.topic, t.partition), 1 + _, t.floor) for t in ticks])
        if any(m.topic() == CLICKS for m in released):
            return
    raise AssertionError(f"clicks@0 still waits; blocking: {order._buffer.blocking()}")


def test_test_driver_advance_time_closes_the_windows_of_every_input() -> None:
    """``TestDriver.advance_time`` ticks every input partition, clicks then views. With
    ``canonical`` the views tick (input 1, mark 1000) waits for clicks to pass 1000 (an
    earlier input must be strictly above), which nothing in a TestDriver ever does: the
    tick stays in the merge (``pending`` 1) and so does every later views record. (Here the
    clicks tick closes the key's window anyway: both inputs have one partition, so the key
    lives in clicks[0] too.)"""
    results = {}
    orders: tuple[Literal["arrival", "canonical"], ...] = ("arrival", "canonical")
    for order in orders:
        driver = TestDriver(make_app(order))
        driver.send("views", b"k", b"", timestamp=5)
        driver.advance_time(1_000)
        results[order] = (emitted(driver), driver.pending)
    assert results["canonical"] == results["arrival"], results


def test_a_forced_tick_the_producer_leaves_out_is_decided_again() -> None:
    """(Fault D.) views grew to 2 partitions; the producer does not know views[1] yet (here:
    the broker has one partition), so ``send_forced`` leaves its forced tick out. The order
    had counted it as decided (one per floor): unless told, it never decides it again, and
    the click it should release waits until views[1] gets a record."""
    grown = TopicHistory.of(VIEWS, [1, 2], {1: 5})
    v1 = (VIEWS, 1)
    for told in (False, True):
        kafka = world.memory_kafka()
        producer = kafka.producer()
        producer.partition_count(VIEWS)  # (its metadata: one views partition)
        order, _database, clock = _order_world(grown)
        order.follow({C0, V0, v1})
        order.take([_record(C0, 0, 10)])
        clock.sleep(1)
        ticks = order.forced_ticks({C0, V0, v1})
        assert [(t.topic, t.partition, t.floor) for t in ticks] == [(VIEWS, 0, 10), (VIEWS, 1, 10)]
        left: list[Tick] = []
        assert send_forced(producer, ticks, world.APP_ID, left_out=left.append) == 1
        assert [(t.topic, t.partition) for t in left] == [v1]
        if told:  # (as the runtime tells it: write_forced_ticks, Pipeline.start)
            order.not_written(left[0])
        clock.sleep(1)
        again = [(t.topic, t.partition, t.floor) for t in order.forced_ticks({C0, V0, v1})]
        assert again == ([(VIEWS, 1, 10)] if told else [])  # (not told: the fault)


def test_a_held_child_assigned_before_its_marker_is_recorded_does_not_stall() -> None:
    """As the gate-held child above, but the registry has not recorded the child's marker
    when the child is assigned -- the usual order: the processor follows the new count
    before ``splitstate expand`` writes and records the markers. ``InputOrder._lineage``
    linked a child only to a recorded marker, so this child started at NO_FLOOR and, held,
    still blocked the view (20) while views is quiet: the stall of fault B. Now a child whose
    marker is not recorded is linked too (its marker's offset is taken from the parent's
    stream, ``framework.runtime.growth_bases``): the parent's mark bounds its ``R``."""
    order, _database, clock = _order_world(clicks=TopicHistory.of(CLICKS, [1, 2]))
    child = (CLICKS, 1)
    order.follow({C0, child, V0})
    flowing = {C0, V0}
    order.take([_record(V0, 0, 20), _record(C0, 0, 30)])
    for _ in range(5):
        clock.sleep(2)
        ticks = order.forced_ticks(flowing)
        released = order.take([_tick_record((t.topic, t.partition), 1 + _, t.floor) for t in ticks])
        if any(m.topic() == CLICKS for m in released):
            return
    raise AssertionError(f"clicks@0 still waits; blocking: {order._buffer.blocking()}")
