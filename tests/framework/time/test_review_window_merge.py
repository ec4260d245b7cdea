"""Review: a sliding window's accumulator is the merge of its points, computed when it closes
(``window_state._sliding_close``: the aggregation's ``load`` and ``merge``, the app's code for
a ``Reduce``). README: "A window whose result raises is a dead letter too (stage ``window``,
holding its accumulator)", and a tumbling window's close is guarded so. A sliding one's merge
ran outside that guard: when it raised at a tick (here: a new version of the app whose
``merge`` takes another accumulator than the stored one), the tick raised out of ``process``
-- the processor crashes on it, every restart again, and every other key the tick closes waits
with it; at a record, the record became a ``processor`` dead letter and the window stayed, so
every later record of the key failed the same way.
"""

from __future__ import annotations

from typing import Any

import orjson

from framework import App, Record
from framework.testing import TestDriver
from framework.time import KeyWindows, Reduce, Sliding
from tests.framework.time.apps import clock_of, emitted, new_app, stages


def merge_lists(first: list[int], second: list[int]) -> list[int]:
    return [*first, *second]


def merge_counts(first: dict[str, int], second: dict[str, int]) -> dict[str, int]:
    """Version 2 keeps ``{"n": count}``: it cannot merge version 1's lists."""
    return {"n": first["n"] + second["n"]}


def make_app(merge: Any, emit: str = "final") -> App:
    app = new_app(partitions=1)
    aggregation = Reduce(list, lambda acc, v: [*acc, v], merge=merge)
    app.windows_store("w", Sliding(10), aggregation, emit=emit)  # type: ignore[arg-type]

    @app.processor("in", dict, ["w"])
    def add(record: Record[dict[str, Any]], windows: KeyWindows) -> None:
        windows.add(record.value["v"])

    return app


def upgraded(driver: TestDriver, app: App) -> TestDriver:
    """A driver of ``app`` over ``driver``'s state and input (a new version deployed)."""
    new = TestDriver(app, on_error="dead-letter")
    new.database = driver.database
    new._next_offset = driver._next_offset  # (the same input partitions)
    return new


def two_keys() -> TestDriver:
    driver = TestDriver(make_app(merge_lists), on_error="dead-letter")
    driver.send("in", b"one", {"v": 1}, timestamp=5)
    driver.send("in", b"two", {"v": 1}, timestamp=5)
    driver.send("in", b"two", {"v": 2}, timestamp=6)  # [-4, 6] holds both: merged to close
    assert emitted(driver) == [(b"two", {"start": -5, "end": 5, "value": [1]})]
    return upgraded(driver, make_app(merge_counts))


def test_a_tick_closing_a_sliding_window_whose_merge_fails_gives_a_dead_letter() -> None:
    driver = two_keys()
    driver.advance_time(100)  # both keys' windows close; two's [-4, 6] cannot be merged
    assert emitted(driver) == [(b"one", {"start": -5, "end": 5, "value": [1]})]
    assert stages(driver) == ["window"]
    letter = driver.dead_letters[0]
    assert letter.key == b"two"
    assert letter.reason.startswith("window [-4, 6] of store 'w' failed for key b'two'")
    held = orjson.loads(letter.value or b"")
    assert held == {"store": "w", "start": -4, "end": 6, "accumulator": None, "points": [[1], [2]]}
    assert clock_of(driver, b"two").windows == {}


def test_a_record_closing_a_sliding_window_whose_merge_fails_is_processed() -> None:
    driver = two_keys()
    driver.send("in", b"two", {"v": 3}, timestamp=100)  # closes [-4, 6]: no merge
    assert stages(driver) == ["window"]
    driver.advance_time(1_000)
    assert emitted(driver)[-1] == (b"two", {"start": 90, "end": 100, "value": [3]})
    assert stages(driver) == ["window"]


def test_emit_current_never_merges_at_a_close() -> None:
    driver = TestDriver(make_app(merge_lists, "current"))
    driver.send("in", b"k", {"v": 1}, timestamp=5)
    driver.send("in", b"k", {"v": 2}, timestamp=6)
    driver = upgraded(driver, make_app(merge_counts, "current"))
    driver.advance_time(1_000)  # closing emits nothing in ``current``: nothing to merge
    assert stages(driver) == []
    assert clock_of(driver, b"k").windows == {}
