"""Ticks: the record format, a malformed one, apps with and without time reading them, and
another app's ticks."""

from __future__ import annotations

from typing import Any

import pytest

from framework import Record
from framework.testing import TestDriver
from framework.time import Count, Tumbling
from framework.time.ticks import TICK_HEADER, TickRead, is_tick, read_tick, tick_headers
from tests.framework.time.apps import emitted, new_app, stages


def test_the_tick_record_format() -> None:
    headers = tick_headers(5, -3)
    assert headers == [(TICK_HEADER, b'{"floor":5,"wall":-3}')]
    assert is_tick(headers) and not is_tick([("other", b"")])
    assert read_tick(headers) == TickRead(5, -3, None)  # (written before ticks named an app)
    named = tick_headers(5, -3, "clicks-app")
    assert named == [(TICK_HEADER, b'{"floor":5,"wall":-3,"app":"clicks-app"}')]
    assert read_tick(named) == TickRead(5, -3, "clicks-app")
    assert read_tick(named).applies_to("clicks-app")  # type: ignore[union-attr]
    assert not read_tick(named).applies_to("views-app")  # type: ignore[union-attr]
    assert read_tick(headers).applies_to("views-app")  # type: ignore[union-attr]
    stepped = tick_headers(5, -3, "clicks-app", steps=2)  # the history steps its writer knew
    assert stepped == [(TICK_HEADER, b'{"floor":5,"wall":-3,"app":"clicks-app","steps":2}')]
    assert read_tick(stepped) == TickRead(5, -3, "clicks-app", 2)


@pytest.mark.parametrize(
    ("headers", "words"),
    [
        ([(TICK_HEADER, None)], "exactly one splitstate.tick header with a value"),
        ([(TICK_HEADER, b"1"), (TICK_HEADER, b"2")], "exactly one"),
        ([(TICK_HEADER, b"{nope")], "is not JSON"),
        (
            [(TICK_HEADER, b'{"floor": 1}')],
            'is not {"floor": ms, "wall": ms, "app": app_id, "steps": n}',
        ),
        ([(TICK_HEADER, b'{"floor": 1, "wall": 2, "app": 3}')], "app is not an app id"),
        ([(TICK_HEADER, b'{"floor": 1, "wall": 2, "app": ""}')], "app is not an app id"),
        ([(TICK_HEADER, b'{"floor": 1, "wall": 2, "app": null}')], "app is not an app id"),
        ([(TICK_HEADER, b'{"floor": 1, "wall": 2, "x": 3}')], "is not {"),
        ([(TICK_HEADER, b'{"floor": 1.5, "wall": 2}')], "not whole milliseconds in range"),
        ([(TICK_HEADER, b'{"floor": true, "wall": 2}')], "not whole milliseconds"),
        ([(TICK_HEADER, b'{"floor": 1, "wall": 9223372036854775807}')], "in range"),
        ([(TICK_HEADER, b'{"floor": 1, "wall": 2, "steps": -1}')], "not a count of history steps"),
        ([(TICK_HEADER, b'{"floor": 1, "wall": 2, "steps": 1.0}')], "not a count"),
        ([(TICK_HEADER, b'{"floor": 1, "wall": 2, "steps": null}')], "not a count"),
        ([(TICK_HEADER, b'{"floor": 1, "wall": 2, "steps": true}')], "not a count"),
        ([(TICK_HEADER, b'{"floor": 1, "wall": 2, "steps": 4294967296}')], "not a count"),
    ],
)
def test_a_malformed_tick_says_why(headers: list[tuple[str, bytes | None]], words: str) -> None:
    read = read_tick(headers)
    assert isinstance(read, str) and words in read


def counting() -> TestDriver:
    app = new_app()

    @app.window("in", Tumbling(10), Count())
    def count(record: Record[Any]) -> int:
        return 1

    return TestDriver(app)


def test_a_malformed_tick_is_a_dead_letter_and_changes_nothing() -> None:
    driver = counting()
    driver.send("in", b"k", timestamp=1)
    before = driver.state("splitstate.time", b"k")
    bad: list[tuple[str, bytes | None]] = [(TICK_HEADER, b'{"floor": "soon", "wall": 1}')]
    for partition in (0, 1):
        driver.send("in", None, b"", headers=bad, partition=partition)
    assert stages(driver) == ["decode", "decode"]
    assert driver.dead_letters[0].reason.startswith("not a tick: ")
    assert driver.state("splitstate.time", b"k") == before
    assert sum(driver.offsets().values()) == 3  # read, and passed


def test_a_tick_changes_only_the_keys_living_in_its_partition() -> None:
    driver = counting()
    driver.send("in", b"k", timestamp=1)
    home = next(iter(driver.offsets()))[1]
    driver.tick("in", 1 - home, 100)
    assert emitted(driver) == []
    driver.tick("in", home, 100)
    assert emitted(driver) == [(b"k", {"start": 0, "end": 10, "value": 1})]


def test_an_app_without_time_reads_ticks_as_nothing_unless_malformed() -> None:
    app = new_app()
    app.store("n")
    app.processor("in", None, ["n"])(lambda record, state: state.set((state.get() or 0) + 1))
    driver = TestDriver(app)
    driver.advance_time(100)
    assert driver.dead_letters == [] and driver.state("n", b"k") is None
    assert sum(driver.offsets().values()) == 2  # one tick in each partition, read
    driver.send("in", None, b"", headers=[(TICK_HEADER, b"junk")])
    assert stages(driver) == ["decode"]


def test_another_apps_tick_is_passed_over_and_ones_naming_no_app_are_applied() -> None:
    """Two apps read one input: each applies its own ticks only. Another app's tick is no
    dead letter and changes nothing (the key's time and its open window stay as they were);
    a tick naming no app (written before ticks named their app) is applied as it was."""
    driver = counting()
    driver.send("in", b"k", timestamp=1)
    home = next(iter(driver.offsets()))[1]
    before = driver.state("splitstate.time", b"k")
    driver.send("in", None, b"", headers=[*tick_headers(100, 100, "another-app")], partition=home)
    assert driver.dead_letters == [] and emitted(driver) == []
    assert driver.state("splitstate.time", b"k") == before
    driver.send("in", None, b"", headers=[*tick_headers(100, 100)], partition=home)
    assert emitted(driver) == [(b"k", {"start": 0, "end": 10, "value": 1})]
