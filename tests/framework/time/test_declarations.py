"""What an app declares about time, and what it is refused; a failed record undoes its key's
time with its state."""

from __future__ import annotations

from typing import Any

import pytest

from framework import ConfigError, Output, Record
from framework.testing import TestDriver
from framework.time import Count, Sum, Timer, Tumbling
from framework.time.specs import WindowSpec
from statestore.codec import RawBytes
from tests.framework.time.apps import clock_of, emitted, new_app, stages


def test_names_are_declared_once_across_kinds_of_stores() -> None:
    app = new_app()
    app.store("a")
    with pytest.raises(ValueError, match="window store 'a': the name is declared twice"):
        app.windows_store("a", Tumbling(10), Count())
    app.windows_store("w", Tumbling(10), Count())
    with pytest.raises(ValueError, match="timer store 'w': the name is declared twice"):
        app.timer("w")(lambda timer, state: None)
    with pytest.raises(ValueError, match="store 'w': the name is declared twice"):
        app.store("w")


@pytest.mark.parametrize("name", ["splitstate.time", "splitstate.due", "splitstate.mine"])
def test_splitstate_names_are_reserved(name: str) -> None:
    app = new_app()
    for declare in (
        lambda: app.store(name),
        lambda: app.windows_store(name, Tumbling(10), Count()),
        lambda: app.timer(name)(lambda timer, state: None),
    ):
        with pytest.raises(ValueError, match=r"names starting 'splitstate\.' are splitstate's own"):
            declare()


def test_an_app_keeps_time_only_when_it_declares_some() -> None:
    app = new_app()
    app.store("plain")
    assert [app.uses_time] == [False]
    assert [spec.name for spec in app.store_specs()] == ["plain"]
    app.store("expiring", ttl=10)
    assert [app.uses_time] == [True]
    specs = {spec.name: spec.value_type for spec in app.store_specs()}
    assert specs == {
        "plain": None,
        "expiring": None,
        "splitstate.time": RawBytes,
        "splitstate.due": RawBytes,
    }


def test_a_window_store_needs_an_output_topic() -> None:
    app = new_app(outputs=("a", "b"))
    app.windows_store("w", Tumbling(10), Count())
    app.processor()(lambda record, state: None)
    with pytest.raises(
        ConfigError, match=r"window store 'w' has no output topic and the app has 2"
    ):
        app.check()
    app.windows["w"] = WindowSpec("w", Tumbling(10), Count(), to="c")
    with pytest.raises(ConfigError, match="emits to 'c', which is not an output topic"):
        app.check()
    app.windows["w"] = WindowSpec("w", Tumbling(10), Count(), to="b")
    app.check()


def test_an_undeclared_store_of_a_timer_is_refused() -> None:
    app = new_app()
    app.timer("t", stores=["nope"])(lambda timer, state: None)
    app.processor()(lambda record, state: None)
    with pytest.raises(ConfigError, match="timer store 't' uses store 'nope', which is not"):
        app.check()


def test_a_bad_emit_is_refused() -> None:
    with pytest.raises(ValueError, match="emit must be 'final' or 'current', got 'last'"):
        new_app().windows_store("w", Tumbling(10), Count(), emit="last")  # type: ignore[arg-type]


def test_a_failing_function_undoes_its_key_time_windows_timers_and_expiries() -> None:
    app = new_app()
    app.store("seen", ttl=100)
    app.windows_store("sums", Tumbling(10), Sum())

    @app.timer("alarm")
    def ring(timer: Timer, state: Any) -> Output:
        return Output({"rang": timer.time})

    @app.processor("in", dict, ["seen", "sums", "alarm"])
    def handle(record: Record[dict[str, Any]], state: dict[str, Any]) -> Output:
        state["seen"].set(record.value["v"])
        state["sums"].add(record.value["v"])
        state["alarm"].set(record.value["v"] + 1000, f"at-{record.value['v']}")
        if record.value.get("fail"):
            raise RuntimeError("no")
        return Output({"ok": record.value["v"]})

    driver = TestDriver(app, on_error="dead-letter")
    driver.send("in", b"k", {"v": 1}, timestamp=5)
    before = {
        name: driver.state(name, b"k") for name in ("seen", "splitstate.time", "splitstate.due")
    }
    # a later time: it would close [0, 10) and fire nothing else; it all stays undone
    driver.send("in", b"k", {"v": 2, "fail": True}, timestamp=50)
    assert stages(driver) == ["processor"]
    assert {name: driver.state(name, b"k") for name in before} == before
    assert clock_of(driver, b"k").time == 5
    assert emitted(driver) == [(b"k", {"ok": 1})]
    driver.send("in", b"k", {"v": 3}, timestamp=20)
    assert emitted(driver)[1:] == [
        (b"k", {"start": 0, "end": 10, "value": 1}),
        (b"k", {"ok": 3}),
    ]
