"""Review: a window's accumulator is kept as JSON in the key's time record, and JSON has no
NaN or infinity (orjson writes them as ``null``). A record whose value made an accumulator
non-finite (``{"x": "NaN"}`` is a valid float to pydantic; a sum that overflows) was taken:
its window's accumulator was then stored as ``null``, every later record of the window failed
(``None + float``) as a ``processor`` dead letter, and the window emitted ``null`` (``Sum``:
the good values lost) or failed at its close (``Mean``). A typed store refuses such a value
(``StoreBatch._readable``); a window now refuses the record (a ``processor`` dead letter
naming why) and keeps what it held."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from framework import Record
from framework.testing import TestDriver
from framework.time import Aggregation, KeyWindows, Max, Mean, Sum, Tumbling
from tests.framework.time.apps import emitted, new_app, stages


class Reading(BaseModel):
    x: float


def driver_of(aggregation: Aggregation) -> TestDriver:
    app = new_app(partitions=1)
    app.windows_store("w", Tumbling(10), aggregation)

    @app.processor("in", Reading, ["w"])
    def add(record: Record[Reading], windows: KeyWindows) -> None:
        windows.add(record.value.x)

    return TestDriver(app, on_error="dead-letter")


@pytest.mark.parametrize(("aggregation", "expected"), [(Sum(), 4.0), (Mean(), 2.0)])
@pytest.mark.parametrize("bad", [b'{"x": "NaN"}', b'{"x": "Infinity"}', b'{"x": "-inf"}'])
def test_a_value_no_accumulator_can_keep_is_refused(
    aggregation: Aggregation, expected: Any, bad: bytes
) -> None:
    driver = driver_of(aggregation)
    driver.send("in", b"k", b'{"x": 1.5}', timestamp=1)
    driver.send("in", b"k", bad, timestamp=2)
    driver.send("in", b"k", b'{"x": 2.5}', timestamp=3)
    driver.advance_time(100)
    assert emitted(driver) == [(b"k", {"start": 0, "end": 10, "value": expected})]
    assert stages(driver) == ["processor"]
    assert "JSON" in driver.dead_letters[0].reason


def test_only_an_accumulator_that_would_not_keep_refuses_the_record() -> None:
    driver = driver_of(Max())
    for at, value in enumerate([b"1.5", b'"NaN"', b'"-inf"', b'"inf"', b"2.5"]):
        driver.send("in", b"k", b'{"x": %s}' % value, timestamp=at)
    driver.advance_time(100)
    assert emitted(driver) == [(b"k", {"start": 0, "end": 10, "value": 2.5})]
    assert stages(driver) == ["processor"]  # (inf: the max would be infinite)


def test_a_sum_that_overflows_is_refused() -> None:
    driver = driver_of(Sum())
    driver.send("in", b"k", b'{"x": 1e308}', timestamp=1)
    driver.send("in", b"k", b'{"x": 1e308}', timestamp=2)  # the sum: inf
    driver.advance_time(100)
    assert emitted(driver) == [(b"k", {"start": 0, "end": 10, "value": 1e308})]
    assert stages(driver) == ["processor"]
