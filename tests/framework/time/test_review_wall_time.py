"""Review: processing-time ("wall") timers and what README says of them.

- README: ``set_wall_after(delay)`` counts "by recorded processing time (the ``wall`` of the
  ticks applied to the key...)". A key takes a tick's ``wall`` only when the tick makes
  something of it due; a key that was quiet keeps the ``wall`` of the last one that did (and
  ``KeyTimers.wall`` is the key's event time when that is later). So a timer set "10 s from
  now" counts from then: a key whose last applied tick was long ago, getting a record whose
  event time lags (a backlog being worked off), has its timer fire at the very next tick,
  however little processing time passed. A Kafka Streams punctuator or a Quix/Flink
  processing-time timer counts from the clock now. Not a small fix (the partition's latest
  recorded processing time would have to reach every reader of the key: a catch-up, the Spark
  fold); left failing.
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
import pytest

from framework import KeyTimers, Output, Record, Timer
from framework.testing import TestDriver
from framework.time.keeper import MAX_FIRINGS
from tests.framework.time.apps import new_app, stages


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


@pytest.mark.xfail(
    strict=True,
    reason="set_wall_after counts from the key's own last applied tick (or its event time)",
)
def test_a_wall_timer_waits_its_delay_of_recorded_processing_time() -> None:
    driver = TestDriver(alarm_app(10_000))
    driver.send("in", b"k", {"wall": True}, timestamp=0)  # due at wall 10 s
    driver.advance_time(0, wall=10_000)  # fires: the key's wall is 10 s
    for second in range(11, 3_600):  # an hour of ticks, none due for the key
        driver.advance_time(0, wall=second * 1_000)
    driver.send("in", b"k", {"wall": True}, timestamp=20_000)  # a backlog's record, now
    driver.advance_time(0, wall=3_601_000)  # one second later
    assert len(driver.output_values()) == 1  # fired already: 20 s + 10 s of a 3,600 s wall


def test_at_a_tick_event_time_items_fire_before_processing_time_ones() -> None:
    driver = TestDriver(alarm_app(1, event_delay=100))
    driver.send("in", b"a", {"wall": True}, timestamp=0)  # a: wall timer due at 1
    driver.send("in", b"b", {"event": True}, timestamp=0)  # b: event timer due at 100
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

    driver = TestDriver(app)
    driver.send("in", b"k", {}, timestamp=0)
    driver.advance_time(MAX_FIRINGS + 10)  # MAX_FIRINGS + 10 periods to catch up
    assert len(fired) == MAX_FIRINGS
    assert stages(driver) == ["timer"]  # the next one: dropped, the timer ends
    assert orjson.loads(driver.dead_letters[0].value or b"")["due"] == MAX_FIRINGS + 1
