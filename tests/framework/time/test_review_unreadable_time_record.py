"""Review: a key's stored time record (``splitstate.time``) that is not in the form splitstate
writes (a damaged or forged state file, a snapshot from elsewhere). README (Security): "a record
or file that is not in the form splitstate writes is refused with an error naming it and the
fix, or dead-lettered, never a crash"; ``decode_due`` follows it for the due times ("a damaged
one is not trusted to trigger anything"). Was: ``KeyClock.decode`` trusted the record, so a tick
that named such a key raised out of ``process`` (orjson's ``JSONDecodeError``, a ``TypeError``,
...): the processor crashed on the tick at every restart, and every other key of the partition
waited with it (until the crash guard skipped the tick for all of them); a record of the key was
a ``processor`` dead letter whose reason was that traceback. Now the record's every field, and
each window store's data by its kind, is checked: a record of the key and a tick that names it
are each a dead letter (stage ``decode``) naming the key and the store, and the tick goes on
with the other keys."""

from __future__ import annotations

from typing import Any

import pytest

from framework import Record
from framework.processing import StoredMessage
from framework.testing import TestDriver
from framework.time import Count, KeyWindows, Tumbling
from framework.time.key_clock import TIME_STORE
from framework.time.ticks import tick_headers
from statestore.due_index import DUE_STORE
from tests.framework.time.apps import emitted, new_app, stages

DAMAGED = [
    b"not json",
    b"[]",
    b'{"t": {"in": "5"}}',
    b'{"t": {"in": 5}, "w": {"w": 7}}',
    b'{"t": {"in": 5}, "tm": {"alarm": {"timer": 5}}}',
    b'{"t": {"in": "5"}, "w": {"w": [[0, 1]]}}',
    b'{"t": {"in": 5}, "w": {"w": [["0", 1]]}}',
    b'{"t": {"in": 5}, "w": {"w": [[0, 1]]}, "x": {"s": true}}',
    b'{"t": {"in": 5}, "w": {"w": [[0, 1]]}, "y": 1}',
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


@pytest.mark.parametrize("damaged", DAMAGED)
def test_a_tick_passes_over_a_key_whose_time_record_is_damaged(damaged: bytes) -> None:
    """The tick closes ``good``'s window and passes over ``bad`` (was: it raised): one dead
    letter, holding the record as stored; ``bad`` is no longer due, so the next tick (and
    the partition's owner, ``TickWriter``) leaves it alone, and its record is kept."""
    driver = driver_with(damaged)
    driver.advance_time(100)
    assert emitted(driver) == [(b"good", {"start": 0, "end": 10, "value": 1})]
    assert stages(driver) == ["decode"]
    [letter] = driver.dead_letters
    assert letter.key == b"bad" and letter.value == damaged
    assert "b'bad'" in letter.reason and "'splitstate.time'" in letter.reason
    assert "Fix:" in letter.reason
    driver.advance_time(200)
    assert stages(driver) == ["decode"]  # once
    assert driver.state(TIME_STORE, b"bad") == damaged
    assert driver.state(DUE_STORE, b"bad") is None


@pytest.mark.parametrize("damaged", DAMAGED)
def test_a_record_of_a_key_whose_time_record_is_damaged_is_a_dead_letter(damaged: bytes) -> None:
    """A dead letter (stage ``decode``, as the tick's) naming the key, the store and the fix
    (was: stage ``processor``, with the decoder's traceback); nothing of the key changes."""
    driver = driver_with(damaged)
    driver.send("in", b"bad", {}, timestamp=50)
    assert stages(driver) == ["decode"]
    reason = driver.dead_letters[0].reason
    assert "b'bad'" in reason and "'splitstate.time'" in reason and "Fix:" in reason
    assert driver.state(TIME_STORE, b"bad") == damaged


@pytest.mark.parametrize("damaged", DAMAGED[:2])
def test_a_rebuild_passes_over_the_key_as_the_live_run_did(damaged: bytes) -> None:
    """The same tick read again in restore mode (a restart rebuilding state, a catch-up):
    no dead letter (the live run wrote it), the same state after it."""
    live, rebuilt = driver_with(damaged), driver_with(damaged)
    live.advance_time(100)
    for partition in range(rebuilt.config.inputs[0].partitions):
        offset = rebuilt.offsets()[("in", partition)]
        headers: list[tuple[str, bytes | None]] = [*tick_headers(100, 100, rebuilt.config.app_id)]
        tick = StoredMessage("in", partition, offset, None, b"", 100, headers)
        batch = rebuilt.database.begin()
        outputs, dead = rebuilt._processor.process(batch, tick, restore=True)
        batch.set_offset("in", partition, offset + 1)
        batch.commit()
        assert (outputs, dead, rebuilt._processor.take_letters()) == ([], None, [])
    for store in (TIME_STORE, DUE_STORE):
        assert [*rebuilt.database.items(store)] == [*live.database.items(store)]
