"""Values that expire by their key's time: read as missing once expired, deleted when the key's
time passes their expiry (at the key's next record or a tick)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from framework import App, Output, Record
from framework.testing import TestDriver
from framework.time import ExpiringState
from statestore import ProcessorDatabase
from statestore.memory import MemoryBackend
from tests.framework.time.apps import clock_of, emitted, new_app, stages


def ttl_app(ttl: Any) -> App:
    """Records ``{"set": value, "ttl": ms}`` set the key's value (``ttl`` given only when in
    the record); every record emits what the key read before."""
    app = new_app()
    app.store("seen", ttl=ttl)

    @app.processor("in", dict, ["seen"])
    def remember(record: Record[dict[str, Any]], seen: ExpiringState) -> Output:
        before = seen.get("missing")
        if "set" in record.value:
            if "ttl" in record.value:
                seen.set(record.value["set"], ttl=record.value["ttl"])
            else:
                seen.set(record.value["set"])
        if record.value.get("delete"):
            seen.delete()
        return Output({"before": before, "expires": seen.expires})

    return app


def send(driver: TestDriver, time: int, **value: Any) -> None:
    driver.send("in", b"k", value, timestamp=time)


def test_a_value_expires_a_ttl_after_it_was_set_by_key_time() -> None:
    driver = TestDriver(ttl_app(timedelta(milliseconds=100)))
    send(driver, 10, set="a")
    send(driver, 109)
    send(driver, 110)
    assert [value for _key, value in emitted(driver)] == [
        {"before": "missing", "expires": 110},
        {"before": "a", "expires": 110},
        {"before": "missing", "expires": None},
    ]
    assert driver.state("seen", b"k") is None  # deleted, not only hidden
    assert clock_of(driver, b"k").expiries == {}


def test_setting_again_moves_the_expiry_and_delete_forgets_it() -> None:
    driver = TestDriver(ttl_app(100))
    send(driver, 10, set="a")
    send(driver, 90, set="b")
    send(driver, 150)
    assert emitted(driver)[-1] == (b"k", {"before": "b", "expires": 190})
    send(driver, 160, delete=True)
    assert clock_of(driver, b"k").expiries == {}
    assert driver.state("splitstate.due", b"k") is None


def test_a_tick_deletes_expired_values_of_keys_without_records() -> None:
    driver = TestDriver(ttl_app(100))
    send(driver, 10, set="a")
    driver.advance_time(109)
    assert driver.state("seen", b"k") == "a"
    driver.advance_time(110)
    assert driver.state("seen", b"k") is None
    assert clock_of(driver, b"k").floor == 110
    assert driver.state("splitstate.due", b"k") is None


def test_ttl_true_lets_each_set_choose() -> None:
    driver = TestDriver(ttl_app(True))
    send(driver, 10, set="forever")
    send(driver, 20, set="short", ttl=5)
    send(driver, 24)
    send(driver, 25, set="forever again")
    send(driver, 10_000)
    assert [value for _key, value in emitted(driver)] == [
        {"before": "missing", "expires": None},
        {"before": "forever", "expires": 25},
        {"before": "short", "expires": 25},
        {"before": "missing", "expires": None},
        {"before": "forever again", "expires": None},
    ]


def test_a_bad_ttl_fails_the_record_only() -> None:
    driver = TestDriver(ttl_app(True), on_error="dead-letter")
    send(driver, 10, set="a", ttl=0)
    send(driver, 11, set="b", ttl="long")
    assert stages(driver) == ["processor", "processor"]
    assert "ttl of store 'seen' must be positive, got 0 ms" in driver.dead_letters[0].reason
    assert "must be a timedelta or whole milliseconds" in driver.dead_letters[1].reason
    assert driver.state("seen", b"k") is None


def test_set_with_ttl_on_a_store_without_one_is_a_clear_type_error() -> None:
    app = new_app()
    app.store("plain")

    @app.processor("in", dict, ["plain"])
    def remember(record: Record[Any], state: Any) -> None:
        state.set(1, ttl=5)

    driver = TestDriver(app, on_error="dead-letter")
    send(driver, 1)
    assert stages(driver) == ["processor"]
    reason = driver.dead_letters[0].reason
    assert reason.startswith("TypeError: store 'plain' was declared without a ttl")
    assert "Fix: declare it with app.store('plain', ttl=...)" in reason


@pytest.mark.parametrize("ttl", [0, -5, None, 1.5])
def test_a_bad_store_ttl_is_refused(ttl: Any) -> None:
    with pytest.raises(ValueError, match="ttl of store 'x'"):
        new_app().store("x", ttl=ttl)


def test_a_timer_function_sees_and_sets_expiring_values() -> None:
    app = new_app()
    app.store("seen", ttl=50)

    @app.timer("later", stores=["seen"])
    def refresh(timer: Any, seen: ExpiringState) -> None:
        seen.set_field("refreshed", timer.key_time)

    @app.processor("in", dict, ["seen", "later"])
    def remember(record: Record[Any], state: dict[str, Any]) -> None:
        state["seen"].set_field("n", record.value["n"])
        state["later"].set(record.value["n"] + 40)

    driver = TestDriver(app)
    send(driver, 0, n=0)
    driver.advance_time(45)  # the timer at 40 sets it again: expiry 45 + 50
    assert driver.state("seen", b"k") == {"n": 0, "refreshed": 45}
    assert clock_of(driver, b"k").expiries == {"seen": 95}
    driver.advance_time(95)
    assert driver.state("seen", b"k") is None


def test_an_expiry_of_a_store_the_app_no_longer_declares_is_forgotten() -> None:
    driver = TestDriver(ttl_app(100))
    send(driver, 10, set="a")
    newer = new_app()  # the same app without its store "seen"
    newer.store("other", ttl=True)  # (it keeps time)
    newer.processor("in", dict, ["other"])(lambda record, other: other.set(record.value))
    again = TestDriver(newer)
    again.database = ProcessorDatabase.in_memory(
        driver.database.identity, newer.store_specs(), backend=memory(driver)
    )
    again.advance_time(200)  # the key's value there expired: nothing to delete
    again.send("in", b"k", {"n": 1}, timestamp=300)
    assert again.dead_letters == []
    assert clock_of(again, b"k").expiries == {}
    assert again.state("other", b"k") == {"n": 1}


def memory(driver: TestDriver) -> MemoryBackend:
    """The in-memory backend a driver's state is kept in."""
    inner = driver.database.backend.inner
    assert isinstance(inner, MemoryBackend)
    return inner
