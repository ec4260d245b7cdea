"""Defects of tables found in review (issue 36 §2), each a strict xfail naming the defect:
an as-of read or a table's stored versions that differ from what the docs promise, or from
one path to another."""

from __future__ import annotations

from typing import Any

import pytest

from framework import App, AppConfig, KeyTimers, Output, Record, Timer
from framework.config import TopicConfig
from framework.config_time import TimeConfig
from framework.decoding import decoder
from framework.tables import Versions, table_store
from framework.tables.spec import TableSpec
from framework.tables.view import KeyTable
from framework.testing import TestDriver
from tests.framework.tables.table_world import Customer, Sent, send, table_app


def region(name: str) -> bytes:
    return Customer(region=name).model_dump_json().encode()


def _field_time_app() -> App:
    """A table whose event time is a field of its value (``valid_from``), and a stream
    whose event time is a field ``at``; reads as of the order's time."""
    app = App(
        AppConfig(
            app_id="field-times",
            inputs=[TopicConfig(topic="customers"), TopicConfig(topic="orders")],
            outputs=[TopicConfig(topic="out")],
            initial_processors=1,
            time=TimeConfig(input_order="canonical"),
        )
    )
    app.table("customers", dict, history=1_000, event_time="valid_from")

    @app.processor("orders", dict, stores=["customers"], event_time="at")
    def read(record: Record[dict[str, Any]], customers: KeyTable[dict[str, Any]]) -> Output:
        return Output({"n": record.value["n"], "customer": customers.get()})

    return app


@pytest.mark.xfail(
    strict=True,
    reason="tombstone time is the Kafka timestamp while values use their event_time field "
    "(TableSpec.time_of): the tombstone jumps the key's table time and the partition's mark, so "
    "a re-insert after it is dropped as older than the horizon (lost forever) and an order "
    "between is applied before the re-insert",
)
def test_a_key_deleted_then_inserted_again_with_an_event_time_field_has_its_new_value() -> None:
    driver = TestDriver(_field_time_app())
    kafka = 1_700_000_000_000  # (producers' clocks: the Kafka timestamps)
    driver.send("customers", b"c0", {"valid_from": 100, "r": "a"}, timestamp=kafka)
    driver.send("customers", b"c0", None, timestamp=kafka + 1_000)  # deleted
    driver.send("customers", b"c0", {"valid_from": 300, "r": "b"}, timestamp=kafka + 2_000)
    driver.send("orders", b"c0", {"n": 1, "at": 400}, timestamp=kafka + 3_000)
    driver.advance_time(kafka + 10_000)
    assert driver.table("customers", b"c0") == {"valid_from": 300, "r": "b"}
    assert driver.output_values() == [{"n": 1, "customer": {"valid_from": 300, "r": "b"}}]


@pytest.mark.xfail(
    strict=True,
    reason="a compacted table topic (docs: 'usually compacted') loses the versions a rebuild "
    "needs: after Kafka's log cleaner ran, a rebuild from the log (Spark build, a lost state "
    "directory, a backfill) reads other versions than the live run did; nothing requires "
    "min.compaction.lag.ms >= the stream's retention, nor says so (KIP-889 sets it)",
)
def test_a_rebuild_from_a_compacted_table_topic_reads_what_the_live_run_read() -> None:
    sent: list[Sent] = [
        ("customers", b"c0", 100, region("north")),
        ("orders", b"c0", 150, b'{"n": 1}'),
        ("customers", b"c0", 200, region("south")),
        ("orders", b"c0", 250, b'{"n": 2}'),
    ]
    live = send(TestDriver(table_app(history=1_000)), sent)
    live.advance_time(1_000_000)
    # the log cleaner keeps the key's last value of the table topic (offsets keep their gaps)
    compacted = [s for s in sent if s[3] != region("north")]
    rebuilt = send(TestDriver(table_app(history=1_000)), compacted)
    rebuilt.advance_time(1_000_000)
    assert live.state("seen", b"c0") == "1:north@150,2:south@250,"
    assert rebuilt.state("seen", b"c0") == live.state("seen", b"c0")


@pytest.mark.xfail(
    strict=True,
    reason="unbounded growth: with history > 0 a deleted key keeps its record (the tombstone "
    "version and table time) until a later table record of the same key prunes it, which "
    "for a key deleted for good never comes; a compacted topic's every deleted key stays "
    "in state forever (Versions._prune runs only on the key's own upserts)",
)
def test_a_deleted_key_leaves_no_record_once_its_history_passed() -> None:
    driver = TestDriver(table_app(history=100))
    driver.send("customers", b"c0", region("north"), timestamp=100)
    driver.send("customers", b"c0", None, timestamp=200)
    driver.send("customers", b"c9", None, timestamp=200)  # (a key never seen: deleted)
    driver.send("orders", b"c1", b'{"n": 1}', timestamp=1_000_000)
    driver.advance_time(10_000_000)
    assert driver.state(table_store("customers"), b"c9") is None
    assert driver.state(table_store("customers"), b"c0") is None


def _stream_field_time_app(keeps_time: bool) -> App:
    app = App(
        AppConfig(
            app_id="stream-field",
            inputs=[TopicConfig(topic="customers"), TopicConfig(topic="orders")],
            initial_processors=1,
            time=TimeConfig(input_order="canonical"),
        )
    )
    app.table("customers", Customer, history=100)
    app.store("seen")
    if keeps_time:
        app.store("expiring", ttl=10_000)

    @app.processor("orders", dict, stores=["customers", "seen"], event_time="at")
    def read(record: Record[dict[str, Any]], state: dict[str, Any]) -> None:
        state["customers"].get()

    return app


@pytest.mark.xfail(
    strict=True,
    reason="a stream record without its event time reads the table in a function of an app "
    "keeping no time: KeyTable.get raises NoEventTimeError inside the function, a 'processor' "
    "dead letter (with on_error: stop the processor stops, 'Fix the function'); the same record "
    "in an app keeping time, or a table record, is a 'decode' dead letter",
)
def test_a_stream_record_without_event_time_is_a_decode_dead_letter_in_any_app() -> None:
    stages = []
    for keeps_time in (True, False):
        driver = TestDriver(_stream_field_time_app(keeps_time), on_error="dead-letter")
        driver.send("orders", b"c0", {"x": 1}, timestamp=5)
        driver.advance_time(100)
        stages.append([letter.stage for letter in driver.dead_letters])
    assert stages == [["decode"], ["decode"]]


@pytest.mark.xfail(
    strict=True,
    reason="Versions.decode accepts stored versions out of time order (or with a time above "
    "the table time): reads bisect them and answer wrongly instead of DamagedTableError",
)
def test_stored_versions_out_of_order_are_refused_as_damaged() -> None:
    spec = TableSpec("customers", Customer, history=1_000)
    damaged = (
        b'{"t": 300, "v": [[300, "{\\"region\\": \\"c\\"}"], [100, "{\\"region\\": \\"a\\"}"]]}'
    )
    view: KeyTable[Customer] = KeyTable(spec, b"c0", damaged, decoder(Customer), lambda: 350)
    with pytest.raises(ValueError, match="damaged"):
        view.get()
    with pytest.raises(ValueError, match="damaged"):
        Versions.decode(damaged)


def _damaged_driver(stored: bytes) -> TestDriver:
    driver = TestDriver(table_app(history=1_000), on_error="dead-letter")
    batch = driver.database.begin()
    batch.store(table_store("customers")).set(b"c0", stored)
    batch.commit()
    return driver


@pytest.mark.xfail(
    strict=True,
    raises=ValueError,
    reason="Versions.decode (versions.py:62) checks the table time `_ms(time)` outside its "
    'try: a stored record whose "t" is no int raises a plain ValueError, which '
    "Tables.upsert does not catch (only DamagedTableError): it escapes RecordProcessor.process "
    "whatever on_error says, so the processor exits on that record at every restart",
)
def test_a_table_record_over_a_damaged_table_time_is_a_decode_dead_letter() -> None:
    driver = _damaged_driver(b'{"t": "x", "v": [[100, "{}"]]}')
    driver.send("customers", b"c0", region("north"), timestamp=100)
    driver.advance_time(1_000)
    assert [letter.stage for letter in driver.dead_letters] == ["decode"]


@pytest.mark.xfail(
    strict=True,
    reason="a stream record whose key's stored table versions are damaged fails inside the "
    "function (DamagedTableError out of KeyTable.get): a 'processor' dead letter with a "
    "traceback, or with on_error: stop the processor stops asking to 'Fix the function'; a "
    "table record of the same key is a 'decode' dead letter naming the stored record",
)
def test_a_stream_record_over_damaged_table_versions_is_a_decode_dead_letter() -> None:
    driver = _damaged_driver(b"not json")
    driver.send("orders", b"c0", b'{"n": 1}', timestamp=150)
    driver.advance_time(1_000)
    assert [letter.stage for letter in driver.dead_letters] == ["decode"]


def _timer_reader(history: int) -> App:
    """The table app with a timer (set by each order 10 ms on) that calls ``get()``."""
    app = table_app(history=history)
    del app.handlers["orders"]

    @app.timer("later", stores=["customers", "seen"])
    def later(timer: Timer, state: dict[str, Any]) -> None:
        found = state["customers"].get()
        state["seen"].set(f"T:{found.region if found else '-'},")

    @app.processor("orders", dict, stores=["later"])
    def order(record: Record[dict[str, int]], timers: KeyTimers) -> None:
        timers.set((record.timestamp or 0) + 10)

    return app


@pytest.mark.xfail(
    strict=True,
    reason="docs/concepts/tables.md says get() raises in a timer's function (no record); with "
    "history=0 it returns the newest version, and with history > 0 the ValueError it raises "
    "(view.py:72) names no fix (use latest() or at(timer.time))",
)
@pytest.mark.parametrize("history", [0, 1_000])
def test_get_in_a_timer_raises_naming_the_fix(history: int) -> None:
    driver = TestDriver(_timer_reader(history), on_error="dead-letter")
    driver.send("customers", b"c0", region("north"), timestamp=100)
    driver.send("orders", b"c0", b'{"n": 1}', timestamp=150)
    driver.advance_time(1_000)
    (letter,) = driver.dead_letters
    assert letter.stage == "timer"
    assert "latest()" in letter.reason and "at(" in letter.reason


@pytest.mark.xfail(
    strict=True,
    reason="one table record with a garbled (far future) time: its key's table time jumps and "
    "its later versions are dropped as older than the horizon, silently (Versions.upsert: no "
    "dead letter, no count); and its partition's mark (a running max) puts every later table "
    "record of the partition, of every key, after every stream record of a sane time, so no "
    "order reads them (KIP-889 drops too, but nothing bounds an event time or tells of it)",
)
def test_a_garbled_future_table_time_does_not_hide_later_versions() -> None:
    driver = TestDriver(table_app(history=1_000), on_error="dead-letter")
    driver.send("customers", b"c0", region("north"), timestamp=100)
    driver.send("customers", b"c0", region("south"), timestamp=10**13)  # (a producer's clock)
    driver.send("customers", b"c0", region("east"), timestamp=200)
    driver.send("customers", b"c1", region("east"), timestamp=200)  # (the same partition)
    driver.send("orders", b"c0", b'{"n": 1}', timestamp=250)
    driver.send("orders", b"c1", b'{"n": 2}', timestamp=250)
    driver.advance_time(10**13 + 1)
    reads = [driver.state("seen", key) for key in (b"c0", b"c1")]
    assert driver.dead_letters or reads == ["1:east@250,", "2:east@250,"]
