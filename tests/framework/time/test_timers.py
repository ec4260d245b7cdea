"""Timers: by event time (set, set_after, cancel, set again by name) and by recorded
processing time (ticks), what a timer's function may do, and what happens when it fails."""

from __future__ import annotations

import time
from typing import Any

import pytest

from framework import App, Output, Record
from framework.processing import ProcessorStoppedError, RecordProcessor
from framework.testing import TestDriver
from framework.time import KeyTimers, Timer, keeper
from tests.framework.time.apps import clock_of, emitted, new_app, stages


def timer_app(**options: Any) -> App:
    """Records say what to do with the key's timers (``do``); a timer logs itself in store
    ``log`` and emits ``{"rang": name, ...}``; timer ``bad`` fails after writing its log,
    timer ``again`` sets itself due again at once, timer ``next`` sets itself 10 ms later
    (three times)."""
    app = new_app(**options)
    app.store("log")

    @app.timer("alarms", stores=["log", "alarms"])
    def ring(timer: Timer, state: dict[str, Any]) -> Output | None:
        log, timers = state["log"], state["alarms"]
        log.set([*(log.get() or []), [timer.name, timer.time, timer.key_time, timer.wall]])
        if timer.name == "bad":
            raise RuntimeError("the alarm is broken")
        if timer.name == "again":
            timers.set(timer.time, "again")
        if timer.name == "next" and len(log.get()) < 3:
            timers.set(timer.time + 10, "next")
        return Output({"rang": timer.name, "due": timer.time, "kind": timer.kind})

    @app.processor("in", dict, ["alarms"])
    def handle(record: Record[dict[str, Any]], timers: KeyTimers) -> Output:
        do, name = record.value.get("do"), record.value.get("name", "timer")
        at = record.value.get("at", 0)
        if do == "set":
            timers.set(at, name)
        elif do == "set_after":
            timers.set_after(at, name)
        elif do == "set_wall":
            timers.set_wall(at, name)
        elif do == "set_wall_after":
            timers.set_wall_after(at, name)
        elif do == "cancel":
            timers.cancel(name)
        return Output({"seen": do, "timer": timers.get(name), "key_time": timers.key_time})

    return app


def send(driver: TestDriver, time: int, key: bytes = b"k", **value: Any) -> None:
    driver.send("in", key, value, timestamp=time)


def rang(driver: TestDriver) -> list[tuple[bytes, Any]]:
    return [(key, value) for key, value in emitted(driver) if "rang" in value]


def test_an_event_timer_fires_when_the_key_time_reaches_it() -> None:
    driver = TestDriver(timer_app())
    send(driver, 10, do="set", at=50)
    assert emitted(driver) == [(b"k", {"seen": "set", "timer": [50, "event"], "key_time": 10})]
    send(driver, 49)
    assert rang(driver) == []
    send(driver, 60, do="look")
    assert emitted(driver)[2:] == [  # the timer fires before the record's function runs
        (b"k", {"rang": "timer", "due": 50, "kind": "event"}),
        (b"k", {"seen": "look", "timer": None, "key_time": 60}),
    ]
    assert driver.state("log", b"k") == [["timer", 50, 60, 60]]
    send(driver, 500)
    assert len(rang(driver)) == 1
    assert clock_of(driver, b"k").timers == {}
    assert driver.state("splitstate.due", b"k") is None


def test_set_after_cancel_and_set_again_by_name() -> None:
    driver = TestDriver(timer_app())
    send(driver, 10, do="set_after", at=20, name="a")
    send(driver, 11, do="set", at=15, name="b")
    send(driver, 12, do="cancel", name="b")
    send(driver, 13, do="set", at=40, name="a")  # moved from 30 to 40
    send(driver, 14, do="cancel", name="nothing")
    assert clock_of(driver, b"k").timers == {"alarms": {"a": (40, "event")}}
    driver.advance_time(39)
    assert rang(driver) == []
    driver.advance_time(40)
    assert rang(driver) == [(b"k", {"rang": "a", "due": 40, "kind": "event"})]


def test_a_timer_set_at_or_before_the_key_time_fires_after_the_function() -> None:
    driver = TestDriver(timer_app())
    send(driver, 10, do="set", at=5)
    assert emitted(driver) == [
        (b"k", {"seen": "set", "timer": [5, "event"], "key_time": 10}),
        (b"k", {"rang": "timer", "due": 5, "kind": "event"}),
    ]


def test_a_timer_that_sets_itself_again_fires_in_turn() -> None:
    driver = TestDriver(timer_app())
    send(driver, 0, do="set", at=10, name="next")
    driver.advance_time(100)  # fires at 10, 20 and 30 in one tick
    assert [value["due"] for _key, value in rang(driver)] == [10, 20, 30]
    assert driver.state("log", b"k") == [["next", t, 100, 100] for t in (10, 20, 30)]


def test_wall_timers_fire_by_recorded_processing_time_only() -> None:
    driver = TestDriver(timer_app())
    send(driver, 10, do="set_wall_after", at=100, name="w")  # counted from the next tick
    send(driver, 20, do="set_wall", at=50, name="v")
    timers = {"w": (100, "wall_after"), "v": (50, "wall")}
    assert clock_of(driver, b"k").timers == {"alarms": timers}
    send(driver, 5000)  # event time does not fire them
    driver.advance_time(5000, wall=60)
    assert rang(driver) == [(b"k", {"rang": "v", "due": 50, "kind": "wall"})]
    assert driver.state("log", b"k") == [["v", 50, 5000, 5000]]  # wall: max(wall, key time)
    # w counts from that tick's processing time (the key's time, which is later)
    assert clock_of(driver, b"k").timers == {"alarms": {"w": (5100, "wall")}}
    driver.advance_time(5000, wall=5099)
    assert len(rang(driver)) == 1
    driver.advance_time(5000, wall=5100)
    assert rang(driver)[1:] == [(b"k", {"rang": "w", "due": 5100, "kind": "wall"})]
    assert clock_of(driver, b"k").wall == 5100


def test_a_delay_needs_a_key_time() -> None:
    app = new_app()

    @app.timer("t")
    def nothing(timer: Timer, state: Any) -> None:
        return None

    @app.processor("in", dict, ["t"])
    def handle(record: Record[Any], timers: KeyTimers) -> None:
        timers.set(record.value["at"])

    driver = TestDriver(app, on_error="dead-letter")
    send(driver, 1, at="soon")
    assert stages(driver) == ["processor"]
    assert "a timer's time is int milliseconds, got 'soon'" in driver.dead_letters[0].reason


def test_a_failing_timer_is_a_dead_letter_dropped_with_its_writes_undone() -> None:
    driver = TestDriver(timer_app(), on_error="dead-letter")
    send(driver, 10, do="set", at=20, name="bad")
    send(driver, 30, do="look")
    assert stages(driver) == ["timer"]
    letter = driver.dead_letters[0]
    assert (letter.topic, letter.offset, letter.key) == ("in", 1, b"k")
    assert letter.reason.startswith(
        "timer 'bad' of store 'alarms' (due 20 ms) failed for key b'k': RuntimeError: the "
        "alarm is broken"
    )
    assert letter.reason.endswith("The timer was dropped and its writes undone.")
    assert driver.state("log", b"k") is None
    assert emitted(driver)[-1] == (b"k", {"seen": "look", "timer": None, "key_time": 30})
    driver.advance_time(100)
    assert stages(driver) == ["timer"]
    assert clock_of(driver, b"k").timers == {}


def test_a_failing_timer_at_a_tick_names_the_tick() -> None:
    driver = TestDriver(timer_app(), on_error="dead-letter")
    send(driver, 10, do="set", at=20, name="bad")
    driver.advance_time(25)
    assert stages(driver) == ["timer"]
    assert driver.dead_letters[0].key == b"k" and driver.dead_letters[0].offset == 1
    assert clock_of(driver, b"k").floor == 25


def test_a_failing_timer_stops_the_processor_with_on_error_stop() -> None:
    driver = TestDriver(timer_app(on_error="stop"))
    send(driver, 10, do="set", at=20, name="bad")
    before = driver.state("splitstate.time", b"k")
    with pytest.raises(ProcessorStoppedError, match="timer 'bad' of store 'alarms'"):
        send(driver, 30)
    with pytest.raises(ProcessorStoppedError, match="Fix the timer function"):
        driver.advance_time(30)
    assert driver.state("splitstate.time", b"k") == before
    assert driver.dead_letters == []


def test_timers_of_several_keys_fire_in_time_then_key_order_at_one_tick() -> None:
    driver = TestDriver(timer_app(partitions=1))  # one tick meets them all
    for key, name, at in [(b"c", "a", 20), (b"b", "z", 10), (b"a", "y", 20), (b"b", "b", 20)]:
        send(driver, 0, key, do="set", at=at, name=name)
    driver.advance_time(20)
    assert [(key, value["due"], value["rang"]) for key, value in rang(driver)] == [
        (b"b", 10, "z"),
        (b"a", 20, "y"),
        (b"b", 20, "b"),
        (b"c", 20, "a"),
    ]


def test_a_timer_that_sets_itself_due_again_at_once_is_dropped_not_a_hang() -> None:
    driver = TestDriver(timer_app(), on_error="dead-letter")
    send(driver, 10, do="set", at=20, name="again")
    started = time.monotonic()
    send(driver, 30, do="look")
    assert time.monotonic() - started < 5
    assert stages(driver) == ["timer"]
    reason = driver.dead_letters[0].reason
    assert "timer 'again' of store 'alarms' (due 20 ms) failed for key b'k'" in reason
    assert "set itself due again at 20 ms, not after the 20 ms it fired at" in reason
    assert "Fix: set it later than timer.time" in reason
    assert driver.state("log", b"k") is None  # its writes undone
    assert emitted(driver)[-1] == (b"k", {"seen": "look", "timer": None, "key_time": 30})
    send(driver, 40, do="set", at=50, name="again")
    driver.advance_time(60)  # at a tick too
    assert stages(driver) == ["timer", "timer"]
    assert clock_of(driver, b"k").timers == {}


def test_timers_that_set_each_other_at_once_stop_at_the_firing_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(keeper, "MAX_FIRINGS", 20)
    app = new_app()

    @app.timer("ping", stores=["ping"])
    def ping(timer: Timer, timers: KeyTimers) -> Output:
        timers.set(timer.time, "b" if timer.name == "a" else "a")
        return Output({"ping": timer.name})

    @app.processor("in", dict, ["ping"])
    def start(record: Record[Any], timers: KeyTimers) -> None:
        timers.set(record.value["at"], "a")

    driver = TestDriver(app, on_error="dead-letter")
    driver.send("in", b"k", {"at": 5}, timestamp=1)
    driver.advance_time(5)
    assert len(emitted(driver)) == 20
    assert stages(driver) == ["timer"]
    assert "fired 20 timers at one time" in driver.dead_letters[0].reason
    assert clock_of(driver, b"k").timers == {}
    driver.send("in", b"k", {"at": 100}, timestamp=6)  # the key goes on
    assert stages(driver) == ["timer"]


def test_an_output_a_timer_cannot_write_is_the_timers_failure() -> None:
    app = new_app()
    app.store("log")

    @app.timer("t")
    def ring(timer: Timer, log: Any) -> Output:
        log.set("rang")
        return Output({"x": 1}, topic="nowhere")

    @app.processor("in", dict, ["t"])
    def start(record: Record[Any], timers: KeyTimers) -> Output:
        timers.set(record.value["at"])
        return Output({"set": record.value["at"]})

    driver = TestDriver(app, on_error="dead-letter")
    send(driver, 1, at=5)
    send(driver, 10, at=20)  # fires the timer at 5, then sets one at 20
    driver.advance_time(20)
    assert stages(driver) == ["timer", "timer"]
    assert "output topic 'nowhere' is not declared" in driver.dead_letters[0].reason
    assert emitted(driver) == [(b"k", {"set": 5}), (b"k", {"set": 20})]
    assert driver.state("log", b"k") is None


def test_a_timer_name_is_text() -> None:
    app = new_app()

    @app.timer("t")
    def nothing(timer: Timer, state: Any) -> None:
        return None

    @app.processor("in", dict, ["t"])
    def handle(record: Record[Any], timers: KeyTimers) -> None:
        timers.set(5, name=record.value["name"])

    driver = TestDriver(app, on_error="dead-letter")
    send(driver, 1, name=7)
    assert stages(driver) == ["processor"]
    assert "a timer's name is text (str), got 7" in driver.dead_letters[0].reason


def test_timers_of_a_store_the_app_no_longer_declares_are_kept_and_never_due() -> None:
    driver = TestDriver(timer_app())
    send(driver, 10, do="set", at=50, name="event")
    send(driver, 11, do="set_wall", at=60, name="wall")
    assert driver.state("splitstate.due", b"k") is not None
    newer = new_app()
    newer.store("log", ttl=True)  # (it keeps time, without the timer store "alarms")
    newer.processor("in", dict, ["log"])(lambda record, log: None)
    driver.app, driver._processor = newer, RecordProcessor(newer, {"in": 2})
    send(driver, 100)
    driver.advance_time(1000)
    assert rang(driver) == []
    assert clock_of(driver, b"k").timers == {
        "alarms": {"event": (50, "event"), "wall": (60, "wall")}
    }
    assert driver.state("splitstate.due", b"k") is None  # no tick needs to read the key


def test_in_a_test_a_failing_timer_raises_and_a_refused_one_stops() -> None:
    """TestDriver's default (issue 37): the timer's own exception raises, as a test expects;
    a timer splitstate refuses (set due again at once) raises ProcessorStoppedError, a public
    type a test can name."""
    driver = TestDriver(timer_app())
    send(driver, 0, do="set", at=20, name="bad")
    with pytest.raises(RuntimeError, match="the alarm is broken"):
        send(driver, 25)
    assert rang(driver) == []
    again = TestDriver(timer_app())
    send(again, 0, do="set", at=20, name="again")
    with pytest.raises(ProcessorStoppedError, match="set itself due again at 20 ms"):
        send(again, 25)
