"""A window store whose grace or size changed between runs (a new version of the app over the
same state): its keys' stored due times (``splitstate.due``) were derived with the old
declarations. Shorter ones left a key due too late: a tick past the window's new close did not
close it (ticks apply to the keys the due times name), and a record past it closed it only
after its function ran. A store declared again after a version without it was never due by a
tick at all. Now a processor derives the due times again when the declarations changed
(``framework.time.rederive``), before it applies anything; a longer grace needed nothing (the
first tick that named the key corrected them) and still closes nothing early."""

from __future__ import annotations

from typing import Any

from framework import App, Output, Record
from framework.testing import TestDriver
from framework.time import Count, KeyWindows, Tumbling
from framework.time.rederive import NOTE, declarations, rederive_due
from framework.time.windows import WindowKind
from statestore.due_index import DUE_STORE, decode_due
from tests.framework.time.apps import emitted, new_app

MINUTE = 60_000


def counting(kind: WindowKind | None) -> App:
    """A count per key in windows of ``kind`` (store ``w``; ``None``: no such store, but a
    store that expires keeps the app's time); every record's value is emitted too."""
    app = new_app(partitions=1)
    app.store("s", ttl=10 * MINUTE)
    if kind is not None:
        app.windows_store("w", kind, Count())

    @app.processor("in", dict, ["s"] if kind is None else ["w"])
    def add(record: Record[dict[str, Any]], windows: KeyWindows) -> Output:
        if kind is not None:
            windows.add(1)
        return Output({"record": record.value["n"]})

    return app


def windows(driver: TestDriver) -> list[tuple[bytes, Any]]:
    """The windows the driver emitted (not the records' own outputs)."""
    return [(key, value) for key, value in emitted(driver) if "record" not in value]


def first_run(kind: WindowKind) -> TestDriver:
    """Version one: key ``k``'s first minute holds a record at 1 s."""
    driver = TestDriver(counting(kind))
    driver.send("in", b"k", {"n": 1}, timestamp=1_000)
    assert driver.dead_letters == []
    return driver


def test_a_shorter_grace_closes_the_window_at_the_first_tick_past_it() -> None:
    before = first_run(Tumbling(MINUTE, grace=30_000))  # closes at 90 s
    driver = TestDriver(counting(Tumbling(MINUTE)), database=before.database)  # at 60 s
    driver.advance_time(70_000)
    assert windows(driver) == [(b"k", {"start": 0, "end": MINUTE, "value": 1})]


def test_a_shorter_grace_closes_the_window_before_a_later_records_function_runs() -> None:
    before = first_run(Tumbling(MINUTE, grace=30_000))
    driver = TestDriver(counting(Tumbling(MINUTE)), database=before.database)
    driver.send("in", b"k", {"n": 2}, timestamp=70_000)
    assert emitted(driver) == [
        (b"k", {"start": 0, "end": MINUTE, "value": 1}),  # closed by the key's time first
        (b"k", {"record": 2}),
    ]


def test_a_shorter_window_closes_at_its_new_end() -> None:
    before = first_run(Tumbling(2 * MINUTE))  # [0, 2 min)
    driver = TestDriver(counting(Tumbling(MINUTE)), database=before.database)
    driver.advance_time(MINUTE)
    assert windows(driver) == [(b"k", {"start": 0, "end": MINUTE, "value": 1})]


def test_a_store_declared_again_closes_its_windows_by_ticks() -> None:
    before = first_run(Tumbling(MINUTE))
    without = TestDriver(counting(None), database=before.database)
    without.advance_time(70_000)  # a tick names the key: nothing of it due now
    assert without.state(DUE_STORE, b"k") is None  # (its window is kept, never closed)
    driver = TestDriver(counting(Tumbling(MINUTE)), database=without.database)
    driver.advance_time(80_000)
    assert windows(driver) == [(b"k", {"start": 0, "end": MINUTE, "value": 1})]


def test_a_longer_grace_closes_nothing_early() -> None:
    before = first_run(Tumbling(MINUTE))
    driver = TestDriver(counting(Tumbling(MINUTE, grace=30_000)), database=before.database)
    assert decode_due(driver.state(DUE_STORE, b"k"))[0] == 90_000
    driver.advance_time(89_999)
    assert windows(driver) == []
    driver.advance_time(90_000)
    assert windows(driver) == [(b"k", {"start": 0, "end": MINUTE, "value": 1})]


def test_due_times_are_derived_again_only_when_the_declarations_changed() -> None:
    app = counting(Tumbling(MINUTE, grace=30_000))
    driver = TestDriver(app)
    for n in range(5):
        driver.send("in", b"k%d" % n, {"n": n}, timestamp=1_000)
    database = driver.database
    assert database.note(NOTE) == declarations(app)  # (a new database: the app's)
    assert rederive_due(database, app) == 0
    shorter = counting(Tumbling(MINUTE))
    assert declarations(shorter) != declarations(app)
    assert rederive_due(database, shorter) == 5
    assert database.note(NOTE) == declarations(shorter)
    assert rederive_due(database, shorter) == 0  # noted: not again
    assert declarations(counting(Tumbling(MINUTE))) == declarations(shorter)
