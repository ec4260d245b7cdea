"""Review (s6): a timer's time or delay out of range.

``set_wall_after(delay)`` at a record now stores the delay and adds it to the ``wall`` of the
next tick applied to the key. A delay that no stored due time can hold (an int past 2^63)
was accepted at the record and made that tick raise out of ``process`` (``struct.error``
while writing the key's due times), so the partition's every reader stopped at the tick: a
processor crash loop, a catch-up and a rebuild that never pass it. Set at a record, such a
time was a dead letter with a bare ``TypeError`` of the encoder before. Now every timer's time
and delay is refused where it is set (at most ``TIME_LIMIT`` either way, as event times and
ticks are): a dead letter, stage ``processor``, naming the timer and the fix.
"""

from __future__ import annotations

from typing import Any

import pytest

from framework import KeyTimers, Output, Record, Timer
from framework.testing import TestDriver
from framework.time.ticks import TIME_LIMIT
from tests.framework.time.apps import new_app


def _app(how: str, value: int) -> Any:
    app = new_app(partitions=1)

    @app.timer("alarm", stores=[])
    def ring(timer: Timer, state: Any) -> Output:
        return Output({"key": timer.key_text})

    @app.processor("in", dict, ["alarm"])
    def arm(record: Record[dict[str, Any]], alarm: KeyTimers) -> None:
        getattr(alarm, how)(value)

    return app


@pytest.mark.parametrize(
    ("how", "value"),
    [
        ("set_wall_after", 2**63),
        ("set_wall_after", TIME_LIMIT + 1),
        ("set_after", 2**64),
        ("set", 2**64),
        ("set", -(2**63) - 1),
        ("set_wall", TIME_LIMIT + 1),
    ],
)
def test_a_timer_out_of_range_is_a_dead_letter_where_it_is_set(how: str, value: int) -> None:
    driver = TestDriver(_app(how, value), on_error="dead-letter")
    driver.send("in", b"k", {}, timestamp=1_000)
    driver.advance_time(2_000, wall=TIME_LIMIT)  # the next tick passes: nothing is due
    assert driver.output_values() == []
    letters = driver.dead_letters
    assert [letter.stage for letter in letters] == ["processor"]
    assert "'alarm'" in letters[0].reason
    assert str(TIME_LIMIT) in letters[0].reason  # (names the limit: the fix)


def test_the_largest_wall_after_counts_from_the_largest_tick() -> None:
    """A delay of ``TIME_LIMIT`` anchored at a tick of ``wall`` ``TIME_LIMIT`` is stored."""
    driver = TestDriver(_app("set_wall_after", TIME_LIMIT))
    driver.send("in", b"k", {}, timestamp=1_000)
    driver.advance_time(2_000, wall=TIME_LIMIT)
    assert driver.dead_letters == []
    assert driver.output_values() == []
