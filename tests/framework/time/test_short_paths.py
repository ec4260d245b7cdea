"""The time path's shorter ways must give what the general ones give.

- ``@app.window``'s records (``TimedFunctions._add``: no savepoints, no views, the key's
  time written once at the end) against a processor function that adds the same value to the
  same window store (``TimedFunctions.record``): for random records (out of order, late,
  values a window refuses or a function fails on, records that close a window whose result
  fails and then fail) and ticks, over every window kind, with ``emit`` final and current, an
  ``on_late`` callback and a ``result`` that fails for some windows, each path's outputs,
  dead letters and stored state (time record, due times) are equal, record by record. With
  ``on_error: stop`` both stop at the same record with the same state.
- A tumbling add (one window replaced or inserted) against the general add of spans (every
  window rebuilt).
- Closing the windows due of a key that holds one window store alone (``TimeKeeper.fire``)
  against closing them item by item (``_next``, ``_fire``), for every window kind.
- The quick check of a time record of times and windows only against the full one.
- A clock ``KeyTimes.save_last`` kept is handed out again only while the key's stored
  bytes are the ones saved from it: not after a failed record changed it, nor after the
  batch that saved it was dropped.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import framework.time.window_state as windows_of
from framework import App, Output, Record
from framework.errors import ProcessorStoppedError
from framework.testing import TestDriver
from framework.time import (
    Collect,
    Hopping,
    KeyWindows,
    Session,
    Sliding,
    Sum,
    Tumbling,
    WindowKind,
    WindowResult,
    key_clock,
)
from framework.time.context import KeyTime
from framework.time.keeper import TimeKeeper
from framework.time.key_clock import TIME_STORE, KeyClock
from framework.time.running import TimedFunctions
from framework.time.specs import WindowSpec
from framework.time.views import WindowAdder
from statestore import DatabaseIdentity, ProcessorDatabase
from statestore.due_index import DUE_STORE
from tests.framework.time.apps import new_app

KEYS = [b"a", b"b"]
KINDS: dict[str, Callable[[], WindowKind]] = {
    "tumbling": lambda: Tumbling(10, grace=3),
    "hopping": lambda: Hopping(10, 5, grace=2),
    "sliding": lambda: Sliding(6, grace=2),
    "session": lambda: Session(8, grace=3),
}
#: a value of the record: an int, a float (NaN and infinity a window refuses), text (a sum
#: fails on it), or "boom" (the value function fails)
values = st.one_of(
    st.integers(-5, 20),
    st.sampled_from([0.5, math.nan, math.inf, "text", "boom", "boom", "boom"]),
)
records = st.tuples(st.just("record"), st.sampled_from(KEYS), st.integers(0, 60), values)
ticks = st.tuples(st.just("tick"), st.integers(0, 70), st.integers(0, 70))
steps = st.lists(st.one_of(records, records, records, ticks), min_size=3, max_size=30)


def value_of(record: Record[dict[str, Any]]) -> Any:
    """What a record adds (its function fails on "boom")."""
    v = record.value["v"]
    if v == "boom":
        raise RuntimeError("boom")
    return v


def late(record: Record[Any], error: Exception) -> Output:
    """``on_late``: say so."""
    return Output({"late": str(error)}, topic="late")


def result_of(result: WindowResult) -> Any:
    """``result``: fails for many windows (an even sum or count of values collected)."""
    value = result.value
    if (len(value) if isinstance(value, list) else value) % 2 == 0:
        raise ValueError("unlucky")
    return {"s": result.start, "e": result.end, "v": result.value}


def window_app(
    kind: str,
    sum_values: bool,
    emit: str,
    on_late: bool,
    result: bool,
    *,
    adder: bool,
    stop: bool = False,
) -> App:
    """A window store ``w`` over input ``in``: by ``@app.window`` (``adder``) or by a
    processor function adding the same value."""
    app = new_app(partitions=2, outputs=("out", "late"), on_error="stop" if stop else "dead-letter")
    options: dict[str, Any] = {
        "emit": emit,
        "to": "out",
        "on_late": late if on_late else None,
        "result": result_of if result else None,
    }
    aggregation = Sum() if sum_values else Collect()
    if adder:
        app.window("in", KINDS[kind](), aggregation, name="w", value_type=dict, **options)(value_of)
    else:
        app.windows_store("w", KINDS[kind](), aggregation, **options)

        @app.processor("in", dict, ["w"])
        def add(record: Record[dict[str, Any]], windows: KeyWindows) -> None:
            windows.add(value_of(record))

    return app


def uses_short_path(driver: TestDriver) -> bool:
    """Whether ``driver`` applies its records by ``TimedFunctions._add``."""
    timing = driver._processor.timing
    assert timing is not None
    functions: TimedFunctions = timing.functions
    return bool(functions._adders)


def seen(driver: TestDriver) -> tuple[Any, ...]:
    """Everything a driver emitted and keeps: outputs by topic, dead letters (the reason of
    a function's failure names its frames: not compared), stored time records and due
    times."""
    outputs = tuple(
        tuple((o.key, o.value, o.origin) for o in driver.outputs(topic))
        for topic in ("out", "late")
    )
    letters = tuple(
        (d.stage, d.key, d.partition, d.offset, "" if d.stage == "processor" else d.reason)
        for d in driver.dead_letters
    )
    state = tuple(
        (key, driver.state(TIME_STORE, key), driver.state(DUE_STORE, key)) for key in KEYS
    )
    return outputs, letters, state


def run(driver: TestDriver, step: tuple[Any, ...]) -> str | None:
    """Apply one step; the stop's message when the processor stopped."""
    try:
        if step[0] == "record":
            _, key, timestamp, v = step
            driver.send("in", key, {"v": v}, timestamp=timestamp)
        else:
            driver.advance_time(step[1], wall=step[2])
    except ProcessorStoppedError as stopped:
        return str(stopped).split(" (at ")[0]
    return None


configurations = st.tuples(
    st.sampled_from(sorted(KINDS)), st.booleans(), st.sampled_from(["final", "current"])
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configurations, st.booleans(), st.sampled_from([True, True, False]), steps)
def test_window_adders_give_what_a_processor_adding_the_same_values_gives(
    configuration: tuple[str, bool, str],
    on_late: bool,
    result: bool,
    inputs: list[tuple[Any, ...]],
) -> None:
    kind, sum_values, emit = configuration
    drivers = [
        TestDriver(
            window_app(kind, sum_values, emit, on_late, result, adder=adder), on_error="dead-letter"
        )
        for adder in (True, False)
    ]
    assert [uses_short_path(d) for d in drivers] == [True, False]
    for step in inputs:
        for driver in drivers:
            run(driver, step)
        assert seen(drivers[0]) == seen(drivers[1])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configurations, steps)
def test_with_on_error_stop_both_stop_at_the_same_record_in_the_same_state(
    configuration: tuple[str, bool, str], inputs: list[tuple[Any, ...]]
) -> None:
    kind, sum_values, emit = configuration
    drivers = [
        TestDriver(window_app(kind, sum_values, emit, False, True, adder=adder, stop=True))
        for adder in (True, False)
    ]
    for step in inputs:
        stops = [run(driver, step) for driver in drivers]
        assert stops[0] == stops[1]
        assert seen(drivers[0]) == seen(drivers[1])
        if stops[0] is not None:
            break


def test_an_app_with_timers_or_ttl_applies_window_adders_as_any_function() -> None:
    """Firing there may run a timer's function or delete an expired value (writes that a
    failure must undo): the short path is for apps whose firing writes nothing."""

    def nothing(timer: Any, state: Any) -> None:
        return None

    declarations: list[Callable[[App], Any]] = [
        lambda app: app.store("kept", ttl=10),
        lambda app: app.timer("t")(nothing),
    ]
    for declare in declarations:
        app = window_app("tumbling", True, "final", False, False, adder=True)
        declare(app)
        assert isinstance(app.handlers["in"].function, WindowAdder)
        assert not uses_short_path(TestDriver(app))


@pytest.mark.parametrize("adder", [True, False])
def test_a_record_that_closes_a_window_whose_result_fails_then_fails_leaves_one_letter(
    adder: bool,
) -> None:
    """Its closing is undone with it: the window's dead letter too."""
    driver = TestDriver(
        window_app("tumbling", True, "final", False, True, adder=adder), on_error="dead-letter"
    )
    driver.send("in", b"a", {"v": 4}, timestamp=5)  # (an even sum: its result fails)
    driver.send("in", b"a", {"v": "boom"}, timestamp=15)
    assert [d.stage for d in driver.dead_letters] == ["processor"]
    driver.send("in", b"a", {"v": 1}, timestamp=15)
    assert [d.stage for d in driver.dead_letters] == ["processor", "window"]


@pytest.mark.parametrize(
    "damaged", [b"not json", b'{"t": {"in": "5"}}', b'{"t": {"in": 5}, "w": {"w": 7}}']
)
def test_a_record_of_a_key_whose_time_record_is_damaged_is_the_same_dead_letter(
    damaged: bytes,
) -> None:
    """Stage ``decode``, naming what is wrong, on both paths (its windows too: by kind)."""
    letters = []
    for adder in (True, False):
        driver = TestDriver(window_app("tumbling", True, "final", False, False, adder=adder))
        driver.send("in", b"a", {"v": 1}, timestamp=5)
        batch = driver.database.begin()
        batch.store(TIME_STORE).set(b"a", damaged)
        batch.commit()
        before = seen(driver)
        driver.send("in", b"a", {"v": 2}, timestamp=15)
        assert seen(driver)[2] == before[2]  # (nothing written)
        letters.append([(d.stage, d.key, d.reason) for d in driver.dead_letters])
    assert letters[0] == letters[1]
    assert [stage for stage, _key, _reason in letters[0]] == ["decode"]


@pytest.mark.parametrize("value", [math.nan, "text"])
def test_a_value_a_window_refuses_leaves_nothing_behind(value: Any) -> None:
    """The short path writes the key's time only once everything succeeded."""
    driver = TestDriver(
        window_app("tumbling", True, "final", False, False, adder=True), on_error="dead-letter"
    )
    driver.send("in", b"a", {"v": 1}, timestamp=5)
    before = seen(driver)[2]
    driver.send("in", b"a", {"v": value}, timestamp=15)  # (it would close [0, 10) first)
    assert [d.stage for d in driver.dead_letters] == ["processor"]
    assert seen(driver)[2] == before
    assert driver.outputs("out") == []


@settings(max_examples=300)
@given(
    st.sets(st.integers(0, 12), max_size=5),
    st.integers(0, 130),
    st.integers(0, 150),
    st.integers(0, 15),
    st.sampled_from([Sum(), Collect()]),
)
def test_a_tumbling_add_changes_what_the_general_add_of_spans_changes(
    starts: set[int], t: int, key_time: int, grace: int, aggregation: Any
) -> None:
    """``_tumbling_add`` (one window, the others kept) gives what ``_span_add`` gives (every
    window rebuilt), late records included."""
    kind = Tumbling(10, grace=grace)
    data = [[start * 10, aggregation.add(aggregation.initial(), start)] for start in sorted(starts)]
    found: list[Any] = []
    for add in (windows_of._tumbling_add, windows_of._span_add):
        try:
            found.append(add(kind, aggregation, data, t, 7, key_time=key_time))
        except windows_of.LateError as error:
            found.append(str(error))
    assert found[0] == found[1]


kinds = st.sampled_from(sorted(KINDS))


@settings(max_examples=300)
@given(
    kinds,
    st.sampled_from(["final", "current"]),
    st.lists(st.tuples(st.integers(0, 60), st.integers(0, 9)), min_size=1, max_size=12),
    st.integers(-1, 30),
)
def test_closing_one_window_store_closes_what_closing_item_by_item_closes(
    kind: str, emit: str, added: list[tuple[int, int]], after: int
) -> None:
    """The key's time is ``after`` ms past when its first window closes (-1: before)."""
    spec = WindowSpec("w", KINDS[kind](), Collect(), emit)  # type: ignore[arg-type]
    keeper = TimeKeeper({"w": spec}, {}, lambda *_: [])
    clock = KeyClock()
    for t, value in added:
        clock.observe("in", t)
        try:
            data, _changed = windows_of.add(
                spec.kind, spec.aggregation, clock.windows.get("w"), t, value, key_time=clock.time
            )
        except windows_of.LateError:
            continue
        clock.windows["w"] = data
    clock.raise_floor(windows_of.next_close(spec.kind, clock.windows.get("w")) + after)
    batch = ProcessorDatabase.in_memory(DatabaseIdentity("short", 0), []).begin()
    general = KeyTime(b"k", KeyClock.decode(clock.encode()), None)
    outputs: list[Any] = []
    while (item := keeper._next(general.clock)) is not None:
        outputs += keeper._fire(batch, general, item)
    short = KeyTime(b"k", KeyClock.decode(clock.encode()), None)
    assert keeper.fire(batch, short) == outputs
    assert short.clock == general.clock


scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=False)
json_values = st.recursive(
    scalars | st.text(max_size=2),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3)
    ),
    max_leaves=6,
)


#: a time record's times: whole ms, some beyond 64 bits, or anything else JSON holds
record_times = st.dictionaries(
    st.text(max_size=2),
    st.integers(-5, 5) | st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1]) | json_values,
    max_size=3,
)
#: time records: mostly of times and windows, some of any field
time_records: st.SearchStrategy[dict[str, Any]] = st.one_of(
    st.fixed_dictionaries(
        {"t": record_times | json_values},
        optional={"w": st.dictionaries(st.text(max_size=2), json_values) | json_values},
    ),
    st.dictionaries(st.sampled_from(["t", "w", "f", "x", "tm", "p", "other"]), json_values),
)


@settings(max_examples=500)
@given(time_records)
def test_a_record_the_quick_check_passes_passes_every_check(data: dict[str, Any]) -> None:
    """``_times_and_windows`` (most records) never passes one ``_check`` refuses."""
    if key_clock._times_and_windows(data):
        key_clock._check(data)


def test_a_saved_clock_is_handed_out_again_only_while_its_bytes_are_stored() -> None:
    """A clock changed and not saved (a record that failed), or saved by a batch that was
    then dropped, is never what the next ``load`` gives: it gives the stored record."""
    keeper = TimeKeeper({}, {}, lambda *_: [])
    app = window_app("tumbling", True, "final", False, False, adder=True)
    database = ProcessorDatabase.in_memory(DatabaseIdentity("short", 0), app.store_specs())
    first = database.begin()
    time = keeper.load(first, b"k")
    time.clock.observe("in", 10)
    keeper.save_last(first, time, (2**63 - 1, 2**63 - 1))
    first.seal()
    first.commit()

    second = database.begin()
    handed = keeper.load(second, b"k")
    assert handed.clock == KeyClock({"in": 10})
    handed.clock.observe("in", 20)  # (and the record failed: nothing saved)
    assert keeper.load(second, b"k").clock == KeyClock({"in": 10})

    time = keeper.load(second, b"k")
    time.clock.observe("in", 30)
    keeper.save_last(second, time, (2**63 - 1, 2**63 - 1))
    second.abort()  # (dropped: its record is read again)
    third = database.begin()
    assert keeper.load(third, b"k").clock == KeyClock({"in": 10})
