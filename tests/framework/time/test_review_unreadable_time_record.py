"""Review: a key's stored time record (``splitstate.time``) that is not in the form splitstate
writes (a damaged or forged state file, a snapshot from elsewhere). README (Security): "a record
or file that is not in the form splitstate writes is refused with an error naming it and the
fix, or dead-lettered, never a crash"; ``decode_due`` follows it for the due times ("a damaged
one is not trusted to trigger anything"), but ``KeyClock.decode`` trusts the record: a tick
that names such a key raises out of ``process`` (orjson's ``JSONDecodeError``, a
``TypeError``, ...), so the processor crashes on the tick on every restart, and every other key
of the partition waits with it (until the crash guard skips the tick for all of them); a record
of the key is a ``processor`` dead letter whose reason is that traceback. Not a small fix (the
record's every field, and each window store's data by its kind, would be checked, and a tick
would dead-letter one key and go on with the others); left failing."""

from __future__ import annotations

from typing import Any

import pytest

from framework import Record
from framework.testing import TestDriver
from framework.time import Count, KeyWindows, Tumbling
from framework.time.key_clock import TIME_STORE
from tests.framework.time.apps import emitted, new_app, stages

DAMAGED = [
    b"not json",
    b"[]",
    b'{"t": {"in": "5"}}',
    b'{"t": {"in": 5}, "w": {"w": 7}}',
    b'{"t": {"in": 5}, "tm": {"alarm": {"timer": 5}}}',
]


def driver_with(damaged: bytes) -> TestDriver:
    app = new_app(partitions=1)
    app.windows_store("w", Tumbling(10), Count())

    @app.processor("in", dict, ["w"])
    def add(record: Record[dict[str, Any]], windows: KeyWindows) -> None:
        windows.add(1)

    driver = TestDriver(app)
    driver.send("in", b"good", {}, timestamp=5)
    driver.send("in", b"bad", {}, timestamp=5)  # its due times: 10
    batch = driver.database.begin()
    batch.store(TIME_STORE).set(b"bad", damaged)
    batch.commit()
    return driver


@pytest.mark.xfail(strict=True, reason="a damaged time record crashes a tick that names it")
@pytest.mark.parametrize("damaged", DAMAGED)
def test_a_tick_passes_over_a_key_whose_time_record_is_damaged(damaged: bytes) -> None:
    driver = driver_with(damaged)
    driver.advance_time(100)  # raises today
    assert emitted(driver) == [(b"good", {"start": 0, "end": 10, "value": 1})]
    assert stages(driver) == ["decode"]
    assert driver.dead_letters[0].key == b"bad"
    assert "splitstate.time" in driver.dead_letters[0].reason


@pytest.mark.parametrize("damaged", DAMAGED)
def test_a_record_of_a_key_whose_time_record_is_damaged_is_a_dead_letter(damaged: bytes) -> None:
    """What a record meets today: a dead letter (no crash), though one whose reason is the
    decoder's traceback, not what is wrong and the fix."""
    driver = driver_with(damaged)
    driver.send("in", b"bad", {}, timestamp=50)
    assert stages(driver) == ["processor"]
