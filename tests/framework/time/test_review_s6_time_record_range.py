"""Review (s6): a stored time record whose numbers no due time can hold.

``KeyClock.decode`` checks a record's form so that a damaged or forged one is a dead letter
(stage ``decode``) and a tick passes over its key, never a crash. It checked that each time
is an int, not that it is one a stored due time (64 bits) holds: orjson reads ints up to
2^64 - 1, so an expiry or a timer past 2^63 - 1 was taken, and the tick that named the key
raised out of ``process`` (``struct.error`` while writing its due times): the partition's every
reader stopped at the tick. Now such a record is damaged like any other.
"""

from __future__ import annotations

import pytest

from framework.time.key_clock import TIME_STORE
from statestore.due_index import DUE_STORE
from tests.framework.time.apps import emitted, stages
from tests.framework.time.test_review_unreadable_time_record import driver_with

OUT_OF_RANGE = [
    b'{"t": {"in": 5}, "w": {"w": [[0, 1]]}, "x": {"s": 18446744073709551615}}',
    b'{"t": {"in": 5}, "w": {"w": [[0, 1]]}, "tm": {"a": {"b": [9223372036854775808, "event"]}}}',
    b'{"t": {"in": 5}, "w": {"w": [[0, 1]]}, "f": 9223372036854775808}',
    b'{"t": {"in": 9223372036854775808}, "w": {"w": [[0, 1]]}}',
]


@pytest.mark.parametrize("damaged", OUT_OF_RANGE)
def test_a_tick_passes_over_a_key_whose_times_are_out_of_range(damaged: bytes) -> None:
    driver = driver_with(damaged)
    driver.advance_time(100)
    assert emitted(driver) == [(b"good", {"start": 0, "end": 10, "value": 1})]
    assert stages(driver) == ["decode"]
    assert driver.state(TIME_STORE, b"bad") == damaged
    assert driver.state(DUE_STORE, b"bad") is None
    driver.send("in", b"bad", {}, timestamp=6)
    assert stages(driver) == ["decode", "decode"]
