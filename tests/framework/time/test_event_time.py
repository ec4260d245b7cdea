"""Where a record's event time comes from: the Kafka timestamp, a field of the value, a
function; ints or aware datetimes; a record without one is a dead letter."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from framework import App, Record
from framework.testing import TestDriver
from framework.time import Count, EventTime, Tumbling
from tests.framework.time.apps import clock_of, emitted, new_app, stages


class Reading(BaseModel):
    """A value with its own time."""

    at: datetime
    v: int = 0


def counted(
    event_time: EventTime,
    value_type: Any = dict,
    on_error: Literal["raise", "dead-letter"] = "dead-letter",
) -> TestDriver:
    app: App = new_app()

    @app.window("in", Tumbling(10), Count(), value_type=value_type, event_time=event_time)
    def count(record: Record[Any]) -> int:
        return 1

    return TestDriver(app, on_error=on_error)


def test_the_kafka_timestamp_by_default_including_zero() -> None:
    driver = counted(None)
    driver.send("in", b"k", {}, timestamp=0)
    assert clock_of(driver, b"k").time == 0
    driver.send("in", b"k", {}, timestamp=12)
    assert emitted(driver) == [(b"k", {"start": 0, "end": 10, "value": 1})]
    assert clock_of(driver, b"k").times == {"in": 12}


def test_a_field_of_the_value() -> None:
    driver = counted("ts")
    driver.send("in", b"k", {"ts": 5}, timestamp=999)
    driver.send("in", b"k", {"ts": 15}, timestamp=1)
    assert emitted(driver) == [(b"k", {"start": 0, "end": 10, "value": 1})]
    assert clock_of(driver, b"k").time == 15


def test_a_function_of_the_record() -> None:
    driver = counted(lambda record: record.value["ts"] * 10)
    driver.send("in", b"k", {"ts": 2})
    assert clock_of(driver, b"k").time == 20
    aware = counted(lambda record: datetime.fromtimestamp(record.value["s"], tz=UTC))
    aware.send("in", b"k", {"s": 3})
    assert clock_of(aware, b"k").time == 3000


def test_a_naive_datetime_is_refused() -> None:
    driver = counted(lambda record: datetime(2024, 1, 1))
    driver.send("in", b"k", {})
    assert stages(driver) == ["decode"]
    reason = driver.dead_letters[0].reason
    assert "without a time zone" in reason and "Fix: give it a tzinfo" in reason
    assert driver.state("splitstate.time", b"k") is None


@pytest.mark.parametrize(
    ("event_time", "value", "words"),
    [
        ("ts", {"other": 1}, "no event-time field 'ts'"),
        ("ts", {"ts": 1.5}, "must be int milliseconds or a datetime, got 1.5"),
        ("ts", {"ts": True}, "got True"),
        (lambda record: None, {}, "the event time function's result must be int"),
    ],
)
def test_a_record_without_an_event_time_is_a_dead_letter(
    event_time: EventTime, value: dict[str, Any], words: str
) -> None:
    driver = counted(event_time)
    driver.send("in", b"k", value)
    assert stages(driver) == ["decode"]
    assert driver.dead_letters[0].reason.startswith("no event time: ")
    assert words in driver.dead_letters[0].reason
    assert driver.state("splitstate.time", b"k") is None


@pytest.mark.parametrize(
    ("event_time", "words"),
    [
        (lambda record: record.value["missing"], "KeyError: 'missing'"),
        (lambda record: record.value.missing, "'dict' object has no attribute 'missing'"),
        (lambda record: int("soon"), "invalid literal for int()"),
    ],
)
def test_a_failing_event_time_function_fails_as_the_processor_would(
    event_time: EventTime, words: str
) -> None:
    """The app's own code failed, not the record: its exception goes to ``on_error`` as the
    processor function's would (it was a ``decode`` dead letter when it was a ValueError,
    TypeError or AttributeError, so ``TestDriver`` did not raise it: issue 37)."""
    driver = counted(event_time)
    driver.send("in", b"k", {})
    assert stages(driver) == ["processor"]
    assert words in driver.dead_letters[0].reason
    raising = counted(event_time, on_error="raise")
    with pytest.raises(Exception, match=re.escape(words)):
        raising.send("in", b"k", {})
    assert raising.state("splitstate.time", b"k") is None


def test_a_field_the_record_lacks_is_still_a_decode_dead_letter() -> None:
    driver = counted("ts")
    driver.send("in", b"k", {})
    driver.send("in", b"k", {"ts": 3})  # the key goes on
    assert stages(driver) == ["decode"]
    assert clock_of(driver, b"k").time == 3


def test_each_input_has_its_own_event_time() -> None:
    app = new_app(inputs=[{"topic": "in", "partitions": 2}, {"topic": "other", "partitions": 2}])
    app.windows_store("n", Tumbling(10), Count())

    def count(record: Record[Any], windows: Any) -> None:
        windows.add(1)

    app.processor("in", dict, ["n"], event_time="ts")(count)
    app.processor("other", dict, ["n"])(count)
    driver = TestDriver(app)
    driver.send("in", b"k", {"ts": 4}, timestamp=50)
    driver.send("other", b"k", {"ts": 60}, timestamp=7)
    assert clock_of(driver, b"k").times == {"in": 4, "other": 7}
    driver.send("other", b"k", {}, timestamp=11)
    assert emitted(driver) == [(b"k", {"start": 0, "end": 10, "value": 2})]


def test_a_datetime_field_of_a_model_is_exact_to_the_millisecond() -> None:
    driver = counted("at", Reading)
    at = datetime(2004, 2, 1, 12, 56, 19, 284000, tzinfo=UTC)  # float seconds: ...283
    driver.send("in", b"k", Reading(at=at).model_dump_json())
    assert clock_of(driver, b"k").time == 1075640179284
    before_epoch = datetime(1969, 12, 31, 23, 59, 59, 999500, tzinfo=UTC)
    driver.send("in", b"j", Reading(at=before_epoch).model_dump_json())
    assert clock_of(driver, b"j").time == -1  # the millisecond it falls in
    east = datetime(2024, 1, 1, 2, 0, tzinfo=timezone(timedelta(hours=2)))
    driver.send("in", b"e", Reading(at=east).model_dump_json())
    assert clock_of(driver, b"e").time == 1704067200000
