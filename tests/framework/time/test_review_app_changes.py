"""Review: what a key's time record keeps from an earlier version of the app.

- A store that had a ttl and is declared without one now: values set since (the app's
  functions get a plain ``KeyState``, which never touches the key's expiries) were deleted at
  the expiry the earlier version had recorded. README: values expire "that long after [they
  were] set"; a store without a ttl has values that do not expire.
- A timer store (or window store) the app no longer declares: its timers are "kept, never
  fired" (``TimeKeeper._next``), but the key's stored due times (``splitstate.due``) kept
  naming them. Every tick then named the key and left it as it was, and the partition's owner
  (``TickWriter._something_due`` reads the same due times) found something due at every
  ``tick_interval``: a tick appended to the partition every second, for ever, each changing
  nothing.
"""

from __future__ import annotations

from typing import Any

from framework import App, Record, Timer
from framework.config_time import TimeConfig
from framework.runtime.ticking import TickWriter
from framework.testing import TestDriver
from tests.framework.time.apps import clock_of, new_app


def upgraded(driver: TestDriver, app: App) -> TestDriver:
    """A driver of ``app`` over ``driver``'s state and input (a new version deployed)."""
    new = TestDriver(app)
    new.database = driver.database
    new._next_offset = driver._next_offset  # (the same input partitions)
    return new


def version_one() -> App:
    app = new_app(partitions=1)
    app.store("s", ttl=100)
    app.store("t", ttl=100)  # (so that version two keeps time too)

    @app.timer("reminders", stores=[])
    def remind(timer: Timer, state: Any) -> None:
        return None

    @app.processor("in", dict, ["s", "reminders"])
    def handle(record: Record[dict[str, Any]], state: dict[str, Any]) -> None:
        state["s"].set(record.value["v"])
        state["reminders"].set_after(50)

    return app


def version_two(*, ttl: bool) -> App:
    """``s`` without its ttl (or with it), and no timer store any more."""
    app = new_app(partitions=1)
    app.store("s", ttl=100 if ttl else False)
    app.store("t", ttl=100)

    @app.processor("in", dict, ["s"])
    def handle(record: Record[dict[str, Any]], s: Any) -> None:
        s.set(record.value["v"])

    return app


def test_a_store_that_lost_its_ttl_keeps_the_values_set_since() -> None:
    driver = TestDriver(version_one())
    driver.send("in", b"k", {"v": 1}, timestamp=0)  # expires at 100 (version one)
    driver = upgraded(driver, version_two(ttl=False))
    driver.send("in", b"k", {"v": 2}, timestamp=10)  # set without a ttl
    driver.advance_time(1_000)
    assert driver.state("s", b"k") == 2
    driver.send("in", b"k", {"v": 3}, timestamp=2_000)
    assert driver.state("s", b"k") == 3
    assert clock_of(driver, b"k").expiries == {}  # the stale expiry is gone, nothing else


def test_a_store_that_keeps_its_ttl_still_expires() -> None:
    driver = TestDriver(version_one())
    driver.send("in", b"k", {"v": 1}, timestamp=0)
    driver = upgraded(driver, version_two(ttl=True))
    driver.advance_time(1_000)
    assert driver.state("s", b"k") is None


def test_a_timer_store_no_longer_declared_stops_making_its_key_due() -> None:
    driver = TestDriver(version_one())
    driver.send("in", b"k", {"v": 1}, timestamp=0)  # a reminder due at 50
    driver = upgraded(driver, version_two(ttl=True))
    driver.send("in", b"other", {"v": 1}, timestamp=0)
    driver.advance_time(60)  # due by the stored due times; nothing the app declares is
    processor = driver._processor  # (the runtime's, as the driver runs it)
    timing = processor.timing
    assert timing is not None
    writer = TickWriter(
        TimeConfig(),
        timing,
        processor.placement,
        reading=None,  # type: ignore[arg-type]  # (only _something_due is asked)
        database=driver.database,
        clock=None,  # type: ignore[arg-type]
    )
    for floor in (70, 80, 90):
        batch = driver.database.begin()
        try:
            assert batch.due_keys(floor, floor) == []
            assert not writer._something_due(batch, ("in", 0, 99), floor, floor)
        finally:
            batch.abort()
    clock = clock_of(driver, b"k")
    assert clock.timers == {"reminders": {"timer": (50, "event")}}  # kept, never fired
    assert clock.time == 0  # and the key's time did not take the floor
