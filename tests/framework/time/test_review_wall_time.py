"""Review: processing-time ("wall") timers and what README says of them.

- ``set_wall_after(delay)`` at a record counted from the key's ``wall``: the last tick that
  made something of the key due (or its event time, when later). A key whose last applied tick
  was long ago, getting a record whose event time lags (a backlog being worked off), had its
  timer fire at the very next tick, however little processing time passed. A record carries no
  processing time; the one recorded nearest after it is the next tick of its partition, which
  every reader meets at the same offset. So a timer set at a record now waits for the next
  tick applied to the key and counts from that tick's ``wall`` (a key with such a timer is due
  at any tick, so its owner writes one within ``time.tick_interval``); set at a tick (in a
  timer's function), it counts from that tick's. (Kafka Streams' wall-clock punctuators and
  Flink's processing-time timers count from the machine's clock when set, which no replay
  sees again.)
- README: "across keys at a tick, in ``(time, key)`` order": every event-time item (of every
  key) fires before any processing-time one, whatever their times (the module docstring of
  ``framework.time.keeper`` says so; README now does too).
- README did not say that one record or tick fires at most ``MAX_FIRINGS`` timers of a key
  (past it each is dropped as a dead letter), which ends a legitimate periodic timer that has
  many periods to catch up (after downtime, or a backlog); README now does.
"""

from __future__ import annotations

from typing import Any

import orjson

from framework import KeyTimers, Output, Record, Timer
from framework.testing import TestDriver
from framework.time.keeper import MAX_FIRINGS
from framework.time.key_clock import TIME_STORE, KeyClock
from tests.framework.time.apps import clock_of, new_app, stages


def alarm_app(delay: int, *, event_delay: int | None = None) -> Any:
    app = new_app(partitions=1)

    @app.timer("alarm", stores=[])
    def ring(timer: Timer, state: Any) -> Output:
        return Output({"key": timer.key_text, "kind": timer.kind, "wall": timer.wall})

    @app.processor("in", dict, ["alarm"])
    def arm(record: Record[dict[str, Any]], alarm: KeyTimers) -> None:
        if record.value.get("wall"):
            alarm.set_wall_after(delay, "wall")
        if event_delay is not None and record.value.get("event"):
            alarm.set_after(event_delay, "event")

    return app


def test_a_wall_timer_waits_its_delay_of_recorded_processing_time() -> None:
    """Each timer set at a record fires ``delay`` after the first tick that follows the
    record, never earlier, whatever the key's event time and its last applied tick."""
    driver = TestDriver(alarm_app(10_000))
    driver.send("in", b"k", {"wall": True}, timestamp=0)
    assert clock_of(driver, b"k").timers == {"alarm": {"wall": (10_000, "wall_after")}}
    dumped = KeyClock.readable(driver.state(TIME_STORE, b"k"))["timers"]
    assert dumped == {"alarm": {"wall": {"delay": 10_000, "kind": "wall_after"}}}  # state dump
    driver.advance_time(0, wall=5_000)  # the first tick after it: due at wall 15 s
    assert clock_of(driver, b"k").timers == {"alarm": {"wall": (15_000, "wall")}}
    driver.advance_time(0, wall=14_999)
    assert driver.output_values() == []
    driver.advance_time(0, wall=15_000)
    assert [value["wall"] for value in driver.output_values()] == [15_000]
    for second in range(16, 3_600):  # an hour of ticks, none due for the key
        driver.advance_time(0, wall=second * 1_000)
    driver.send("in", b"k", {"wall": True}, timestamp=20_000)  # a backlog's record, now
    driver.advance_time(0, wall=3_601_000)  # one second later: due at 3,611 s
    driver.advance_time(0, wall=3_610_999)
    assert len(driver.output_values()) == 1  # was: fired at once (20 s + 10 s of a 3,600 s wall)
    driver.advance_time(0, wall=3_611_000)
    assert [value["wall"] for value in driver.output_values()] == [15_000, 3_611_000]


def test_a_wall_timer_set_at_a_tick_counts_from_that_tick() -> None:
    """A timer's function (at a tick) knows the processing time now: its ``set_wall_after``
    counts from the tick's wall at once; ``get`` tells a timer still waiting for its tick."""
    app = new_app(partitions=1)
    seen: list[Any] = []

    @app.timer("again", stores=["again"])
    def again(timer: Timer, timers: KeyTimers) -> Output:
        if timer.time < 30_000:
            timers.set_wall_after(10_000)
        seen.append(timers.get())
        return Output({"at": timer.time})

    @app.processor("in", dict, ["again"])
    def arm(record: Record[dict[str, Any]], timers: KeyTimers) -> None:
        timers.set_wall_after(10_000)
        seen.append(timers.get())

    driver = TestDriver(app)
    driver.send("in", b"k", {}, timestamp=0)
    for wall in (1_000, 11_000, 21_000, 31_000, 41_000):
        driver.advance_time(0, wall=wall)
    assert [value["at"] for value in driver.output_values()] == [11_000, 21_000, 31_000]
    assert seen == [(10_000, "wall_after"), (21_000, "wall"), (31_000, "wall"), None]


def test_at_a_tick_event_time_items_fire_before_processing_time_ones() -> None:
    driver = TestDriver(alarm_app(1, event_delay=100))
    driver.send("in", b"a", {"wall": True}, timestamp=0)
    driver.send("in", b"b", {"event": True}, timestamp=0)  # b: event timer due at 100
    driver.advance_time(0, wall=0)  # a: its wall timer counts from here, due at 1
    driver.advance_time(1_000, wall=1_000)
    assert [value["key"] for value in driver.output_values()] == ["b", "a"]


def test_a_periodic_timer_with_many_periods_to_catch_up_is_dropped() -> None:
    app = new_app(partitions=1)
    fired: list[int] = []

    @app.timer("every", stores=["every"])
    def again(timer: Timer, every: KeyTimers) -> None:
        fired.append(timer.time)
        every.set(timer.time + 1)  # a period of 1 ms

    @app.processor("in", dict, ["every"])
    def start(record: Record[dict[str, Any]], every: KeyTimers) -> None:
        every.set(1)

    driver = TestDriver(app, on_error="dead-letter")
    driver.send("in", b"k", {}, timestamp=0)
    driver.advance_time(MAX_FIRINGS + 10)  # MAX_FIRINGS + 10 periods to catch up
    assert len(fired) == MAX_FIRINGS
    assert stages(driver) == ["timer"]  # the next one: dropped, the timer ends
    assert orjson.loads(driver.dead_letters[0].value or b"")["due"] == MAX_FIRINGS + 1
