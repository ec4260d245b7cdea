"""Defects of tables found in review (issue 36 §2): an as-of read or a table's stored
versions that differ from what the docs promise, or from one path to another. Those fixed
are regression tests here; those left are strict xfails naming the defect."""

from __future__ import annotations

from typing import Any, Literal

import pytest

from framework import App, AppConfig, ConfigError, KeyTimers, Output, Record, Timer
from framework.config import TopicConfig
from framework.config_time import TimeConfig
from framework.coordination.app_topics import input_and_output_specs
from framework.decoding import decoder
from framework.input_times import InputTimes
from framework.processing import StoredMessage
from framework.tables import Versions, table_store
from framework.tables.spec import TableSpec
from framework.tables.topics import check_table_topics, least_compaction_lag_ms, table_topic_configs
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


def test_a_tombstone_adds_its_kafka_timestamp_to_the_mark_only_where_it_is_its_time() -> None:
    """The mark every path computes (``InputTimes``: live, ``TestDriver``, catch-up, the
    Spark build): a field-time table's tombstone adds none, a Kafka-time table's its own."""
    kafka = 1_700_000_000_000
    value = b'{"valid_from": 100, "r": "a"}'
    fields = InputTimes(_field_time_app())
    first = StoredMessage("customers", 0, 0, b"c0", value, kafka, [])
    assert fields.of("customers", 0, 0, first) == 100
    tombstone = StoredMessage("customers", 0, 1, b"c0", None, kafka + 1_000, [])
    assert fields.of("customers", 0, 1, tombstone) is None
    assert InputTimes(table_app()).of("customers", 0, 1, tombstone) == kafka + 1_000


def test_a_table_join_sees_a_field_time_tables_tombstone_delete_its_newest_value() -> None:
    app = App(
        AppConfig(
            app_id="field-joins",
            inputs=[TopicConfig(topic="customers"), TopicConfig(topic="limits")],
            outputs=[TopicConfig(topic="out")],
            initial_processors=1,
            time=TimeConfig(input_order="canonical"),
        )
    )
    app.table("customers", dict, history=1_000, event_time="at")
    app.table("limits", dict, history=1_000, event_time="at")

    @app.table_join("customers", "limits", how="outer")
    def joined(record: Record[Any], customer: Any, limit: Any) -> Output:
        return Output({"customer": customer and customer["r"], "limit": limit and limit["n"]})

    driver = TestDriver(app)
    kafka = 1_700_000_000_000
    driver.send("customers", b"c0", {"at": 100, "r": "a"}, timestamp=kafka)
    driver.send("limits", b"c0", {"at": 100, "n": 5}, timestamp=kafka)
    driver.send("customers", b"c0", None, timestamp=kafka + 1_000)
    driver.advance_time(kafka + 10_000)
    assert driver.output_values()[-1] == {"customer": None, "limit": 5}
    assert driver.table("customers", b"c0") is None


def _compacted_app(history: int, stream_retention: int | None) -> App:
    app = table_app(history=history)
    inputs = [
        topic if topic.topic != "orders" else topic.model_copy(update={"retention_ms": r})
        for topic, r in zip(app.config.inputs, [None, stream_retention], strict=True)
    ]
    app.configure(app.config.model_copy(update={"inputs": inputs}))
    return app


def test_a_rebuild_from_a_table_topic_compacted_too_early_is_refused() -> None:
    """The review's scenario: the log cleaner removed version ``north`` while order 1, which
    read it, is still in the stream; a rebuild then reads ``-`` for it. The versions are
    gone, so no rebuild can be exact: the app refuses a table topic whose
    ``min.compaction.lag.ms`` lets the cleaner remove them (``framework.tables.topics``:
    history + the streams' retention), and ``topics create`` makes it so."""
    sent: list[Sent] = [
        ("customers", b"c0", 100, region("north")),
        ("orders", b"c0", 150, b'{"n": 1}'),
        ("customers", b"c0", 200, region("south")),
        ("orders", b"c0", 250, b'{"n": 2}'),
    ]
    live = send(TestDriver(table_app(history=1_000)), sent)
    live.advance_time(1_000_000)
    compacted = [s for s in sent if s[3] != region("north")]
    rebuilt = send(TestDriver(table_app(history=1_000)), compacted)
    rebuilt.advance_time(1_000_000)
    assert live.state("seen", b"c0") == "1:north@150,2:south@250,"
    assert rebuilt.state("seen", b"c0") == "1:-@150,2:south@250,"  # (what was lost)
    app = _compacted_app(history=1_000, stream_retention=86_400_000)
    orders = {"retention.ms": "86400000", "cleanup.policy": "delete"}
    early = {"cleanup.policy": "compact", "min.compaction.lag.ms": "0"}
    with pytest.raises(ConfigError, match=r"min.compaction.lag.ms to at least 86401000"):
        check_table_topics(app, {"customers": early, "orders": orders})
    made = table_topic_configs(app)["customers"]
    assert made == {"cleanup.policy": "compact", "min.compaction.lag.ms": "86401000"}
    check_table_topics(app, {"customers": made, "orders": orders})
    specs = {s.name: s.config for s in input_and_output_specs(app.config, table_topic_configs(app))}
    assert specs["customers"] == made and specs["orders"] == {"retention.ms": "86400000"}


def test_a_table_topic_is_not_compacted_while_a_stream_keeps_every_record() -> None:
    app = _compacted_app(history=1_000, stream_retention=None)  # (-1: created so)
    assert table_topic_configs(app) == {"customers": {"retention.ms": "-1"}}
    whole = {"retention.ms": "-1", "cleanup.policy": "delete"}
    check_table_topics(app, {"customers": whole, "orders": whole})
    lagging = {"cleanup.policy": "compact", "min.compaction.lag.ms": str(10**12)}
    with pytest.raises(ConfigError, match="no version may be compacted"):
        check_table_topics(app, {"customers": lagging, "orders": whole})


def test_the_least_compaction_lag_is_history_plus_the_longest_stream_retention() -> None:
    assert least_compaction_lag_ms(1_000, [5_000, 20_000]) == 21_000
    assert least_compaction_lag_ms(1_000, [5_000, -1]) is None
    assert least_compaction_lag_ms(1_000, []) is None


def test_a_delete_of_a_key_never_seen_stores_nothing() -> None:
    driver = TestDriver(table_app(history=100))
    driver.send("customers", b"c9", None, timestamp=200)  # (a key never seen: deleted)
    driver.send("orders", b"c1", b'{"n": 1}', timestamp=1_000_000)
    driver.advance_time(10_000_000)
    assert driver.state(table_store("customers"), b"c9") is None


def test_a_deleted_key_leaves_no_record_once_its_next_record_passed_its_history() -> None:
    driver = TestDriver(table_app(history=100))
    driver.send("customers", b"c0", region("north"), timestamp=100)
    driver.send("customers", b"c0", None, timestamp=200)
    driver.send("orders", b"c1", b'{"n": 1}', timestamp=250)
    driver.advance_time(1_000)
    assert driver.state(table_store("customers"), b"c0") is not None  # (history: kept)
    driver.send("customers", b"c0", None, timestamp=300)  # (horizon 200: the deletion's)
    driver.send("orders", b"c1", b'{"n": 2}', timestamp=1_000_000)
    driver.advance_time(10_000_000)
    assert driver.state(table_store("customers"), b"c0") is None


@pytest.mark.xfail(
    strict=True,
    reason="left: a deleted key with history > 0 keeps one small record (its versions within "
    "history, table time) until a later table record of the same key moves its horizon past "
    "the deletion (Versions._prune runs on the key's own table records only); for a key "
    "deleted for good that never comes. Purging it by time needs the key's time to pass "
    "without a record of it: ticks reaching table keys, not built",
)
def test_a_deleted_key_leaves_no_record_once_its_history_passed() -> None:
    driver = TestDriver(table_app(history=100))
    driver.send("customers", b"c0", region("north"), timestamp=100)
    driver.send("customers", b"c0", None, timestamp=200)
    driver.send("orders", b"c1", b'{"n": 1}', timestamp=1_000_000)
    driver.advance_time(10_000_000)
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


def test_a_stream_record_without_event_time_is_a_decode_dead_letter_in_any_app() -> None:
    stages = []
    for keeps_time in (True, False):
        driver = TestDriver(_stream_field_time_app(keeps_time), on_error="dead-letter")
        driver.send("orders", b"c0", {"x": 1}, timestamp=5)
        driver.advance_time(100)
        stages.append([letter.stage for letter in driver.dead_letters])
    assert stages == [["decode"], ["decode"]]


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


def _damaged_driver(
    stored: bytes, app: App | None = None, on_error: Literal["raise", "dead-letter"] = "dead-letter"
) -> TestDriver:
    app = table_app(history=1_000) if app is None else app
    driver = TestDriver(app, on_error=on_error)
    batch = driver.database.begin()
    batch.store(table_store("customers")).set(b"c0", stored)
    batch.commit()
    return driver


def test_a_table_record_over_a_damaged_table_time_is_a_decode_dead_letter() -> None:
    driver = _damaged_driver(b'{"t": "x", "v": [[100, "{}"]]}')
    driver.send("customers", b"c0", region("north"), timestamp=100)
    driver.advance_time(1_000)
    assert [letter.stage for letter in driver.dead_letters] == ["decode"]


def test_a_stream_record_over_damaged_table_versions_is_a_decode_dead_letter() -> None:
    driver = _damaged_driver(b"not json")
    driver.send("orders", b"c0", b'{"n": 1}', timestamp=150)
    driver.advance_time(1_000)
    assert [letter.stage for letter in driver.dead_letters] == ["decode"]


@pytest.mark.parametrize("keeps_time", [False, True])
def test_a_stream_record_over_damaged_table_versions_does_not_stop_the_processor(
    keeps_time: bool,
) -> None:
    """Where a failure of the app's code stops the processor too (``TestDriver``'s
    ``raise``), in an app that keeps time or not: the record is a
    ``decode`` dead letter naming the table, the function is not called."""
    app = table_app(history=1_000)
    if keeps_time:
        app.store("expiring", ttl=10_000)
    driver = _damaged_driver(b'{"t": 300, "v": [[300, "a"], [100, "b"]]}', app, "raise")
    driver.send("orders", b"c0", b'{"n": 1}', timestamp=150)
    driver.advance_time(1_000)
    (letter,) = driver.dead_letters
    assert letter.stage == "decode" and "table 'customers'" in letter.reason
    assert driver.state("seen", b"c0") is None


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


def test_get_in_a_timer_raises_naming_the_fix_with_history() -> None:
    driver = TestDriver(_timer_reader(1_000), on_error="dead-letter")
    driver.send("customers", b"c0", region("north"), timestamp=100)
    driver.send("orders", b"c0", b'{"n": 1}', timestamp=150)
    driver.advance_time(1_000)
    (letter,) = driver.dead_letters
    assert letter.stage == "timer"
    assert "latest()" in letter.reason and "at(timer.time)" in letter.reason


def test_get_in_a_timer_returns_the_newest_version_without_history() -> None:
    driver = TestDriver(_timer_reader(0), on_error="dead-letter")
    driver.send("customers", b"c0", region("north"), timestamp=100)
    driver.send("orders", b"c0", b'{"n": 1}', timestamp=150)
    driver.advance_time(1_000)
    assert driver.dead_letters == []
    assert driver.state("seen", b"c0") == "T:north,"


@pytest.mark.xfail(
    strict=True,
    reason="left, documented (tables.md and time.md, 'Times from the future'): one table "
    "record with a garbled (far future) time moves its key's table time, so the key's later "
    "versions are dropped as older than the horizon, silently (as KIP-889 drops them), and "
    "moves its partition's mark (a running max), so every later table record of the "
    "partition is ordered after the stream records of sane times. It is the time model's "
    "general property (a future event time closes a key's windows too): validate times in "
    "event_time and dead-letter records too far ahead",
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
