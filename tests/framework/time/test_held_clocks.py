"""The decoded time a ``TimeKeeper`` holds for the keys it saved last (``HeldClocks``) must
give exactly what decoding the stored record gives.

- For random records and ticks (out of order, late, failing, NaN and text values), an
  ``@app.window`` app holding clocks and the same app holding none emit the same outputs and
  dead letters and store the same state, step by step; the holding one did use what it held.
- A key's time record or due times written by any other way (a damaged record, another valid
  one, a batch dropped) are read, not what was held.
- ``holdable`` takes only clocks that their stored record decodes back to exactly.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework.testing import TestDriver
from framework.time.context import KeyTime
from framework.time.held_clocks import HeldClocks, holdable
from framework.time.keeper import TimeKeeper
from framework.time.key_clock import TIME_STORE, KeyClock
from framework.time.running import TimedFunctions
from statestore.due_index import DUE_STORE
from tests.framework.time.test_short_paths import run, seen, steps, window_app

KINDS = ["tumbling", "hopping", "session", "sliding"]


def keeper_of(driver: TestDriver) -> TimeKeeper:
    """The driver's time keeper."""
    timing = driver._processor.timing
    assert timing is not None
    functions: TimedFunctions = timing.functions
    return functions.keeper


class CountedClocks(HeldClocks):
    """``HeldClocks`` that count what was taken."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.taken = 0

    def take(
        self, key: bytes, record: bytes | None, due: bytes | None
    ) -> tuple[KeyClock, tuple[int, int] | None] | None:
        """``HeldClocks.take``, counted."""
        found = super().take(key, record, due)
        self.taken += found is not None
        return found


def driver_holding(
    kind: str, limit: int, sum_values: bool = True, on_late: bool = False
) -> TestDriver:
    """An ``@app.window`` app's driver whose keeper holds up to ``limit`` clocks."""
    driver = TestDriver(window_app(kind, sum_values, "final", on_late, True, adder=True))
    keeper_of(driver).held = CountedClocks(limit)
    return driver


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(KINDS), st.booleans(), st.booleans(), st.sampled_from([1, 100]), steps)
def test_holding_clocks_changes_nothing_but_what_is_decoded(
    kind: str, sum_values: bool, on_late: bool, limit: int, inputs: list[tuple[Any, ...]]
) -> None:
    drivers = [driver_holding(kind, held, sum_values, on_late) for held in (limit, 0)]
    for step in inputs:
        for driver in drivers:
            run(driver, step)
        assert seen(drivers[0]) == seen(drivers[1])


def test_a_key_s_next_record_takes_its_held_clock() -> None:
    driver = driver_holding("tumbling", 100)
    for t in (1, 2, 3, 14):
        driver.send("in", b"a", {"v": 1}, timestamp=t)
    held = keeper_of(driver).held
    assert isinstance(held, CountedClocks)
    assert held.taken == 3
    assert len(held) == 1


def test_only_the_newest_keys_are_held_past_the_limit() -> None:
    driver = driver_holding("tumbling", 4)
    for i in range(10):
        driver.send("in", b"k%d" % i, {"v": 1}, timestamp=1)
    held = keeper_of(driver).held
    assert 3 <= len(held) <= 4
    driver.send("in", b"k9", {"v": 1}, timestamp=2)
    driver.send("in", b"k0", {"v": 1}, timestamp=2)
    assert isinstance(held, CountedClocks)
    assert held.taken == 1  # (k0's was dropped)


@pytest.mark.parametrize("written", ["later", "damaged", "due"])
def test_a_record_written_another_way_is_read_not_the_held_clock(written: str) -> None:
    """A later valid record makes the next record late; a damaged one makes it a dead
    letter (stage decode); due times written elsewhere are the ones compared against."""
    driver = driver_holding("tumbling", 100)
    driver.send("in", b"a", {"v": 1}, timestamp=5)
    batch = driver.database.begin()
    if written == "due":
        batch.store(DUE_STORE).delete(b"a")
    else:
        stored = b"not json" if written == "damaged" else KeyClock({"in": 1_000}).encode()
        batch.store(TIME_STORE).set(b"a", stored)
    batch.commit()
    stages = {"later": ["late"], "damaged": ["decode"], "due": []}[written]
    driver.send("in", b"a", {"v": 2}, timestamp=6)
    assert [d.stage for d in driver.dead_letters] == stages
    held = keeper_of(driver).held
    assert isinstance(held, CountedClocks)
    assert held.taken == 0
    if written == "due":  # (written again: the due times of the window still open)
        assert driver.state(DUE_STORE, b"a") is not None


def test_a_dropped_batch_s_clock_is_not_taken() -> None:
    driver = driver_holding("tumbling", 100)
    driver.send("in", b"a", {"v": 1}, timestamp=5)
    keeper = keeper_of(driver)
    committed = driver.state(TIME_STORE, b"a")
    batch = driver.database.begin()
    time = keeper.load(batch, b"a")
    time.clock.observe("in", 50)
    keeper.keep(batch, time)
    assert len(keeper.held) == 1
    batch.abort()
    batch = driver.database.begin()
    again = keeper.load(batch, b"a")
    assert again.clock == KeyClock.decode(committed)
    assert again.clock.time == 5


def test_a_loaded_key_s_due_times_are_kept_with_its_clock() -> None:
    driver = driver_holding("tumbling", 100)
    driver.send("in", b"a", {"v": 1}, timestamp=5)
    keeper = keeper_of(driver)
    batch = driver.database.begin()
    time = keeper.load(batch, b"a")
    keeper.keep(batch, time)  # (nothing changed: the due times are not written again)
    again = keeper.load(batch, b"a")
    assert (again.clock, again.loaded_due) == (time.clock, time.loaded_due)
    assert again.stored_due is batch.store(DUE_STORE).get(b"a")


def tumbling(acc: Any, t: Any = 5) -> KeyClock:
    """A clock of one tumbling window holding ``acc``, its key's time ``t``."""
    return KeyClock({"in": t}, windows={"w": [[0, acc]]})


@pytest.mark.parametrize("acc", [3, -2.5, 0.0, "text", True, None, 1 << 63])
def test_clocks_of_json_scalars_are_held(acc: Any) -> None:
    clock = tumbling(acc)
    assert holdable(clock)
    assert KeyClock.decode(clock.encode()) == clock


class Number(int):
    """An int of another type (JSON gives an int back)."""


@pytest.mark.parametrize(
    "clock",
    [
        tumbling((1, 2)),  # JSON gives a list back
        tumbling([1, 2]),  # (a list: changed in place by an aggregation, perhaps)
        tumbling({"a": 1}),
        tumbling(math.nan),  # JSON has no NaN nor infinity
        tumbling(math.inf),
        tumbling(Number(3)),
        tumbling(3, t=5.0),  # not whole milliseconds: a decoded one is damaged
        tumbling(3, t=True),
        tumbling(3, t=1 << 63),
        KeyClock({"in": 5}, windows={"w": [[0, 9, 1]]}),  # a session
        KeyClock({"in": 5}, windows={"w": {"p": [[5, 1]], "o": [5]}}),  # sliding
        KeyClock({"in": 5}, windows={"w": [(0, 1)]}),
        KeyClock({"in": 5}, timers={"t": {"n": (9, "event")}}),
        KeyClock({"in": 5}, expiries={"s": 9}),
        KeyClock({"in": 5}, floor=5.5),  # type: ignore[arg-type]
    ],
)
def test_clocks_decoding_would_change_are_not_held(clock: KeyClock) -> None:
    assert not holdable(clock)
    held = HeldClocks(10)
    held.hold(b"k", b"{}", None, clock, None)
    assert len(held) == 0


def test_a_clock_not_holdable_drops_the_key_s_entry() -> None:
    held = HeldClocks(10)
    held.hold(b"k", b"{}", None, tumbling(1), None)
    held.hold(b"k", b"{}", None, tumbling((1, 2)), None)
    assert len(held) == 0


def test_an_entry_is_taken_only_for_the_very_objects_written() -> None:
    held = HeldClocks(10)
    record, due = KeyClock({"in": 5}).encode(), b"0123456789abcdef"
    clock = KeyClock({"in": 5})
    held.hold(b"k", record, due, clock, (1, 2))
    assert held.take(b"k", bytes(bytearray(record)), due) is None  # (equal, not the same)
    assert len(held) == 0  # (taken out all the same)
    held.hold(b"k", record, due, clock, (1, 2))
    assert held.take(b"k", record, None) is None
    held.hold(b"k", record, due, clock, (1, 2))
    assert held.take(b"k", record, due) == (clock, (1, 2))
    assert held.take(b"k", record, due) is None  # (taken: the clock is the loader's)


def test_no_clock_is_held_with_a_limit_of_0() -> None:
    held = HeldClocks(0)
    held.hold(b"k", b"{}", None, KeyClock({"in": 5}), None)
    assert len(held) == 0
    with pytest.raises(ValueError, match="at least 0"):
        HeldClocks(-1)


def test_key_time_keeps_the_stored_due_value() -> None:
    time = KeyTime(b"k", KeyClock(), (1, 2), stored_due=b"x")
    assert time.stored_due == b"x"
