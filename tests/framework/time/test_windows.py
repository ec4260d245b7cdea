"""Window kinds through the test driver: which windows a record falls in, when they close and
what they emit (``final`` once, ``current`` at every change), grace and late records."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import orjson
import pytest

from framework import Output, Record
from framework.processing import ProcessorStoppedError
from framework.testing import TestDriver
from framework.time import Collect, Count, Hopping, LateError, Session, Sliding, Sum, Tumbling
from framework.time.windows import WindowKind
from tests.framework.time.apps import clock_of, emitted, new_app, stages


def windowed(kind: WindowKind, emit: Any = "final", **options: Any) -> TestDriver:
    """A driver of an app collecting each record's ``v`` in windows of ``kind``."""
    app = new_app()

    @app.window("in", kind, Collect(), value_type=dict, emit=emit, **options)
    def values(record: Record[dict[str, Any]]) -> Any:
        return record.value["v"]

    return TestDriver(app, on_error="dead-letter")


def send(driver: TestDriver, *timed: tuple[int, Any], key: bytes = b"k") -> None:
    for at, value in timed:
        driver.send("in", key, {"v": value}, timestamp=at)


def test_spans_are_aligned_to_the_epoch() -> None:
    assert Tumbling(10).spans(7) == [(0, 10)]
    assert Tumbling(10).spans(10) == [(10, 20)]
    assert Tumbling(10).spans(-3) == [(-10, 0)]
    assert Hopping(10, 5).spans(7) == [(0, 10), (5, 15)]
    assert Hopping(10, 3).spans(10) == [(3, 13), (6, 16), (9, 19)]
    assert Hopping(10, 10).spans(10) == [(10, 20)]
    assert Tumbling(timedelta(minutes=1)).size == 60_000


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: Tumbling(0), "must be positive"),
        (lambda: Tumbling(10, grace=-1), "zero or more"),
        (lambda: Hopping(10, 11), "longer than its size"),
        (lambda: Session(1.5), "timedelta or whole milliseconds"),  # type: ignore[arg-type]
        (lambda: Sliding(timedelta(microseconds=10)), "must be positive"),
    ],
)
def test_bad_window_kinds_are_refused(make: Any, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        make()


def test_tumbling_final_is_emitted_once_when_key_time_passes_the_end() -> None:
    driver = windowed(Tumbling(10))
    send(driver, (1, "a"), (5, "b"))
    assert emitted(driver) == []
    send(driver, (12, "c"))  # the key's time reaches 12 >= 10: [0, 10) closes
    assert emitted(driver) == [(b"k", {"start": 0, "end": 10, "value": ["a", "b"]})]
    driver.advance_time(19)
    assert len(emitted(driver)) == 1
    driver.advance_time(20)
    driver.advance_time(500)
    assert emitted(driver)[1:] == [(b"k", {"start": 10, "end": 20, "value": ["c"]})]
    assert clock_of(driver, b"k").windows == {}
    assert driver.dead_letters == []


def test_grace_keeps_a_window_open_for_out_of_order_records() -> None:
    driver = windowed(Tumbling(10, grace=5))
    send(driver, (1, "a"), (12, "b"), (3, "c"))  # 12 < 10 + 5: [0, 10) still open
    assert emitted(driver) == []
    send(driver, (15, "d"))
    assert emitted(driver) == [(b"k", {"start": 0, "end": 10, "value": ["a", "c"]})]
    send(driver, (4, "late"))
    assert stages(driver) == ["late"]
    letter = driver.dead_letters[0]
    assert letter.reason.startswith("late by 11 ms: event time 4 ms")
    assert "reached 15 ms" in letter.reason and "the key's time is 15 ms" in letter.reason
    assert letter.value == b'{"v":"late"}'


def test_hopping_windows_overlap() -> None:
    driver = windowed(Hopping(10, 5))
    send(driver, (7, "a"), (12, "b"))  # 12 >= 10: [0, 10) closes
    assert emitted(driver) == [(b"k", {"start": 0, "end": 10, "value": ["a"]})]
    driver.advance_time(100)
    assert emitted(driver)[1:] == [
        (b"k", {"start": 5, "end": 15, "value": ["a", "b"]}),
        (b"k", {"start": 10, "end": 20, "value": ["b"]}),
    ]


def test_a_hopping_record_partly_late_is_added_to_its_open_windows() -> None:
    driver = windowed(Hopping(10, 5))
    send(driver, (12, "a"), (8, "b"))  # [0, 10) closed at 10; [5, 15) is open
    assert driver.dead_letters == []
    driver.advance_time(100)
    assert [value["value"] for _key, value in emitted(driver)] == [["a", "b"], ["a"]]


def open_windows(driver: TestDriver) -> list[Any]:
    """The key ``k``'s open windows, read by a record of topic ``peek`` (see ``peeking``)."""
    from framework.time.keeper import TimeKeeper  # noqa: PLC0415
    from framework.time.views import KeyWindows  # noqa: PLC0415

    batch = driver.database.begin()
    try:
        time = TimeKeeper.open(batch, b"k")
        return KeyWindows(time, driver.app.windows["values"]).open()
    finally:
        batch.abort()


def test_emit_current_sends_every_change_keyed_by_window() -> None:
    driver = windowed(Tumbling(10), emit="current")
    send(driver, (1, "a"), (5, "b"), (12, "c"))
    driver.advance_time(100)
    assert emitted(driver) == [
        (b"k@0", {"start": 0, "end": 10, "value": ["a"]}),
        (b"k@0", {"start": 0, "end": 10, "value": ["a", "b"]}),
        (b"k@10", {"start": 10, "end": 20, "value": ["c"]}),
    ]
    assert clock_of(driver, b"k").windows == {}


def test_a_late_record_is_a_dead_letter_and_changes_nothing() -> None:
    app = new_app()
    app.store("seen")
    app.windows_store("sums", Tumbling(10), Sum())

    @app.processor("in", value_type=dict, stores=["seen", "sums"])
    def add(record: Record[dict[str, Any]], state: dict[str, Any]) -> Output:
        state["seen"].set((state["seen"].get() or 0) + 1)
        state["sums"].add(record.value["v"])
        return Output({"added": record.value["v"]})

    driver = TestDriver(app)
    send(driver, (25, 1))
    before = driver.state("splitstate.time", b"k")
    send(driver, (3, 2))
    assert stages(driver) == ["late"]
    assert driver.dead_letters[0].reason.startswith("late by 22 ms")
    assert driver.state("seen", b"k") == 1
    assert driver.state("splitstate.time", b"k") == before
    assert emitted(driver) == [(b"k", {"added": 1})]


def test_on_late_is_called_instead_of_a_dead_letter() -> None:
    seen: list[tuple[int, int]] = []

    def on_late(record: Record[Any], late: LateError) -> Output:
        seen.append((late.t, late.by))
        return Output({"late": record.value["v"]}, key=b"late")

    driver = windowed(Tumbling(10), on_late=on_late)
    send(driver, (25, "a"), (3, "b"))
    assert driver.dead_letters == []
    assert seen == [(3, 22)]
    assert emitted(driver) == [(b"late", {"late": "b"})]
    driver.advance_time(100)
    assert emitted(driver)[1:] == [(b"k", {"start": 20, "end": 30, "value": ["a"]})]


def test_each_key_has_its_own_time() -> None:
    driver = windowed(Tumbling(10))
    send(driver, (100, "a"), key=b"fast")
    send(driver, (3, "b"), key=b"slow")  # not late: only its own records count
    assert driver.dead_letters == []
    assert emitted(driver) == []


def test_a_result_function_shapes_the_output() -> None:
    driver = windowed(Tumbling(10), result=lambda w: {"n": len(w.value), "at": w.end})
    send(driver, (1, "a"), (2, "b"), (10, "c"))
    assert emitted(driver) == [(b"k", {"n": 2, "at": 10})]


def test_count_over_a_to_topic() -> None:
    app = new_app(outputs=("a", "b"))
    app.windows_store("n", Tumbling(10), Count(), to="b")

    @app.processor("in", stores=["n"])
    def count(record: Record[bytes], windows: Any) -> None:
        windows.add(1)

    driver = TestDriver(app)
    driver.send("in", b"k", b"x", timestamp=1)
    driver.advance_time(10)
    assert emitted(driver, "b") == [(b"k", {"start": 0, "end": 10, "value": 1})]
    assert emitted(driver, "a") == []


def test_a_session_closes_gap_plus_grace_after_its_last_record() -> None:
    driver = windowed(Session(10))
    send(driver, (0, "a"), (5, "b"), (14, "c"))  # 14 < 5 + 10: the same session
    assert emitted(driver) == []
    send(driver, (24, "d"))  # 24 = 14 + 10: not in it, and it closes
    assert emitted(driver) == [(b"k", {"start": 0, "end": 14, "value": ["a", "b", "c"]})]
    driver.advance_time(34)
    assert emitted(driver)[1:] == [(b"k", {"start": 24, "end": 24, "value": ["d"]})]


def test_one_record_merges_two_sessions() -> None:
    driver = windowed(Session(15, grace=100))
    send(driver, (0, "a"), (20, "b"))
    assert [(w.start, w.end, w.value) for w in open_windows(driver)] == [
        (0, 0, ["a"]),
        (20, 20, ["b"]),
    ]
    send(driver, (10, "c"))
    assert [(w.start, w.end, w.value) for w in open_windows(driver)] == [(0, 20, ["a", "b", "c"])]
    driver.advance_time(135)
    assert emitted(driver) == [(b"k", {"start": 0, "end": 20, "value": ["a", "b", "c"]})]


def test_sliding_windows_end_at_each_record() -> None:
    driver = windowed(Sliding(10))
    send(driver, (5, "a"), (12, "b"), (14, "c"), (30, "d"))
    driver.advance_time(30)  # [20, 30] holds records at 30 until the key's time passes it
    assert len(emitted(driver)) == 3
    driver.advance_time(31)
    assert emitted(driver) == [
        (b"k", {"start": -5, "end": 5, "value": ["a"]}),
        (b"k", {"start": 2, "end": 12, "value": ["a", "b"]}),
        (b"k", {"start": 4, "end": 14, "value": ["a", "b", "c"]}),
        (b"k", {"start": 20, "end": 30, "value": ["d"]}),
    ]
    # no window is open; the record at 30 is kept for a later one ([21, 31] would hold it)
    assert clock_of(driver, b"k").windows == {"values": {"o": [], "p": [[30, ["d"]]]}}


def test_sliding_grace_and_a_record_that_only_a_later_window_holds() -> None:
    driver = windowed(Sliding(10, grace=10))
    send(driver, (100, "a"), (95, "b"))  # [90, 100] open until 110; 95 opens [85, 95]
    send(driver, (88, "c"))  # its own window closed at 98, but [85, 95] is open till 105
    assert driver.dead_letters == []
    driver.advance_time(200)
    assert emitted(driver) == [
        (b"k", {"start": 85, "end": 95, "value": ["b", "c"]}),
        (b"k", {"start": 90, "end": 100, "value": ["a", "b"]}),
    ]
    send(driver, (185, "late"))
    assert stages(driver) == ["late"]
    assert driver.dead_letters[0].reason.startswith("late by 15 ms")


def test_a_record_inside_an_open_session_is_not_late() -> None:
    driver = windowed(Session(50, grace=100))
    send(driver, (100, 1), (140, 2), (180, 3), (200, 4))  # [100, 200], closes at 350
    send(driver, (300, 5))  # another session; the key's time is 300
    send(driver, (110, 6))  # 110 + 50 + 100 <= 300, but [100, 200] is open
    assert driver.dead_letters == []
    driver.advance_time(1000)
    assert emitted(driver) == [
        (b"k", {"start": 100, "end": 200, "value": [1, 2, 3, 4, 6]}),
        (b"k", {"start": 300, "end": 300, "value": [5]}),
    ]


def test_emit_current_of_merged_sessions_removes_the_windows_merged_away() -> None:
    driver = windowed(Session(15, grace=100), emit="current")
    send(driver, (20, "a"), (0, "b"), (10, "c"))
    assert emitted(driver) == [
        (b"k@20", {"start": 20, "end": 20, "value": ["a"]}),
        (b"k@0", {"start": 0, "end": 0, "value": ["b"]}),
        (b"k@20", None),  # merged into the session starting at 0: a tombstone
        (b"k@0", {"start": 0, "end": 20, "value": ["b", "a", "c"]}),
    ]


def broken_result(window: Any) -> Any:
    if window.start == 10:
        raise ZeroDivisionError("no result for this one")
    return {"n": len(window.value)}


def test_a_window_whose_result_fails_is_a_dead_letter_holding_its_values() -> None:
    driver = windowed(Tumbling(10), result=broken_result)
    send(driver, (12, "a"), (25, "b"))  # [10, 20) closes at the record at 25
    assert stages(driver) == ["window"]
    letter = driver.dead_letters[0]
    assert (letter.key, letter.offset) == (b"k", 1)
    assert letter.reason.startswith(
        "window [10, 20) of store 'values' failed for key b'k': ZeroDivisionError: no result"
    )
    assert orjson.loads(letter.value or b"") == {
        "store": "values",
        "start": 10,
        "end": 20,
        "accumulator": ["a"],
    }
    assert clock_of(driver, b"k").windows == {"values": [[20, ["b"]]]}  # the record went on
    send(driver, (31, "c"))
    driver.advance_time(40)
    assert emitted(driver) == [(b"k", {"n": 1}), (b"k", {"n": 1})]
    assert stages(driver) == ["window"]


def test_a_window_whose_output_cannot_be_written_fails_at_a_tick_too() -> None:
    driver = windowed(Tumbling(10), result=lambda window: {1, 2})  # a set: not JSON
    send(driver, (1, "a"))
    driver.advance_time(10)
    assert stages(driver) == ["window"]
    assert "TypeError" in driver.dead_letters[0].reason
    assert clock_of(driver, b"k").windows == {}


def test_a_failing_window_stops_the_processor_with_on_error_stop() -> None:
    app = new_app(on_error="stop")
    app.windows_store("w", Tumbling(10), Collect(), result=broken_result)
    app.processor("in", dict, ["w"])(lambda record, windows: windows.add(record.value["v"]))
    driver = TestDriver(app)
    send(driver, (12, "a"))
    with pytest.raises(ProcessorStoppedError, match=r"window \[10, 20\) of store 'w' failed"):
        driver.advance_time(20)
    assert clock_of(driver, b"k").windows == {"w": [[10, ["a"]]]}


def test_on_late_returning_something_else_than_outputs_is_named() -> None:
    driver = windowed(Tumbling(10), on_late=lambda record, late: {"late": True})
    send(driver, (25, "a"), (3, "b"))
    assert stages(driver) == ["processor"]
    assert "<lambda> (on_late of 'values') returned a dict" in driver.dead_letters[0].reason


def test_add_at_needs_int_milliseconds() -> None:
    app = new_app()
    app.windows_store("w", Tumbling(10), Count())
    app.processor("in", dict, ["w"])(lambda record, windows: windows.add(1, at=record.value["at"]))
    driver = TestDriver(app, on_error="dead-letter")
    for at in (2.5, "3", True):
        driver.send("in", b"k", {"at": at}, timestamp=1)
    assert stages(driver) == ["processor"] * 3
    assert "an event time is int milliseconds, got 2.5" in driver.dead_letters[0].reason
    assert clock_of(driver, b"k").windows == {}
