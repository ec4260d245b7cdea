"""Tables through the code every path runs (``RecordProcessor``, here by ``TestDriver``):
upserts and tombstones, as-of reads in and out of history, pruning by the key's table time,
the refusals (arrival order, a processor for a table, a table that is no input), a bad table
value as a dead letter, and the same state whatever the inputs' interleaving."""

from __future__ import annotations

import pytest

from framework import App, AppConfig, ConfigError, KeyTable, Output, Record
from framework.config import TopicConfig
from framework.config_time import TimeConfig
from framework.tables import Versions, table_store
from framework.testing import TestDriver
from tests.framework.tables.table_world import (
    KEYS,
    Customer,
    Sent,
    drawn,
    home,
    interleaved,
    send,
    stored,
    table_app,
)


def seen(driver: TestDriver, key: bytes = b"c0") -> str:
    return str(driver.state("seen", key) or "")


def versions(driver: TestDriver, key: bytes = b"c0") -> Versions:
    return Versions.decode(driver.state(table_store("customers"), key))


def region(name: str) -> bytes:
    return Customer(region=name).model_dump_json().encode()


def order(n: int) -> dict[str, int]:
    return {"n": n}


def test_an_order_reads_its_customer_as_of_its_own_time() -> None:
    driver = TestDriver(table_app(history=1_000))
    driver.send("customers", b"c0", region("north"), timestamp=100)
    driver.send("customers", b"c0", region("south"), timestamp=200)
    driver.send("orders", b"c0", order(1), timestamp=150)  # (late: between the versions)
    driver.send("orders", b"c0", order(2), timestamp=250)
    driver.send("orders", b"c0", order(3), timestamp=50)  # before any version
    driver.advance_time(10_000)  # (the last orders wait for the table's partition)
    assert seen(driver) == "1:north@150,2:south@250,3:-@50,"
    assert versions(driver).items == [(100, region("north")), (200, region("south"))]


def test_a_table_record_after_a_later_order_is_applied_before_it() -> None:
    """The order (time 300) arrives first; the customer's record (time 200) after it is
    still applied first: the canonical order, not arrival, decides."""
    driver = TestDriver(table_app(history=1_000))
    driver.send("orders", b"c0", order(1), timestamp=300)
    assert driver.pending == 1
    driver.send("customers", b"c0", region("east"), timestamp=200)
    driver.advance_time(10_000)
    assert seen(driver) == "1:east@300,"


def test_a_tombstone_deletes_but_an_older_read_sees_the_value() -> None:
    driver = TestDriver(table_app(history=1_000))
    driver.send("customers", b"c0", region("north"), timestamp=100)
    driver.send("customers", b"c0", None, timestamp=200)
    driver.send("orders", b"c0", order(1), timestamp=250)
    driver.send("orders", b"c0", order(2), timestamp=150)
    driver.advance_time(10_000)
    assert seen(driver) == "1:-@250,2:north@150,"
    assert versions(driver).items == [(100, region("north")), (200, None)]


def test_an_empty_value_is_a_tombstone_too() -> None:
    driver = TestDriver(table_app(history=0))
    driver.send("customers", b"c0", region("north"), timestamp=100)
    driver.send("customers", b"c0", b"", timestamp=200)
    driver.advance_time(200)
    assert driver.state(table_store("customers"), b"c0") is None  # (history 0: deleted)
    assert driver.dead_letters == []


def test_reads_older_than_the_history_get_none() -> None:
    driver = TestDriver(table_app(history=100))
    driver.send("customers", b"c0", region("north"), timestamp=100)
    driver.send("customers", b"c0", region("south"), timestamp=1_000)
    driver.send("orders", b"c0", order(1), timestamp=1_100)
    driver.send("orders", b"c0", order(2), timestamp=950)  # (late) within: horizon 900
    driver.send("orders", b"c0", order(3), timestamp=899)  # out of history
    driver.advance_time(10_000)
    assert seen(driver) == "1:south@1100,2:north@950,3:-@899,"


def test_pruning_by_the_keys_table_time_keeps_the_newest_older_version() -> None:
    driver = TestDriver(table_app(history=100))
    for at, name in [(100, "a"), (200, "b"), (300, "c"), (400, "d")]:
        driver.send("customers", b"c0", region(name), timestamp=at)
    driver.advance_time(400)  # (the table's records wait for the orders' partitions)
    # horizon 300: 100 and 200 go, 300 (the answer at the horizon) and 400 stay
    assert versions(driver).items == [(300, region("c")), (400, region("d"))]
    assert versions(driver).time == 400
    driver.send("customers", b"c1", region("x"), timestamp=5_000)  # another key: no effect
    driver.advance_time(5_000)
    assert versions(driver).items == [(300, region("c")), (400, region("d"))]


@pytest.mark.parametrize(("history", "expected"), [(0, "1:north@250,"), (1_000, "1:south@250,")])
def test_history_zero_reads_the_version_applied_last_whatever_its_time(
    history: int, expected: str
) -> None:
    """A late table record (time 100 after 200) is the newest with history 0, as in an
    unversioned KTable; with history the order reads the version of the largest time."""
    driver = TestDriver(table_app(history=history))
    driver.send("customers", b"c0", region("south"), timestamp=200)
    driver.send("customers", b"c0", region("north"), timestamp=100)
    driver.send("orders", b"c0", order(1), timestamp=250)
    driver.advance_time(10_000)
    assert seen(driver) == expected


def test_latest_and_at_read_any_time_within_history() -> None:
    app = App(
        AppConfig(
            app_id="reads",
            inputs=[TopicConfig(topic="customers"), TopicConfig(topic="orders")],
            outputs=[TopicConfig(topic="out")],
            initial_processors=1,
            time=TimeConfig(input_order="canonical"),
        )
    )
    app.table("customers", Customer, history=1_000)

    @app.processor("orders", stores=["customers"])
    def read(record: Record[bytes], customers: KeyTable[Customer]) -> Output:
        def name(found: Customer | None) -> str | None:
            return None if found is None else found.region

        return Output(
            {
                "latest": name(customers.latest()),
                "at_150": name(customers.at(150)),
                "at_99": name(customers.at(99)),
                "time": customers.time,
                "default": customers.at(99, "none"),
            }
        )

    driver = TestDriver(app)
    driver.send("customers", b"c0", region("north"), timestamp=100)
    driver.send("customers", b"c0", region("south"), timestamp=200)
    driver.send("orders", b"c0", b"", timestamp=300)
    driver.advance_time(10_000)
    assert driver.output_values() == [
        {"latest": "south", "at_150": "north", "at_99": None, "time": 200, "default": "none"}
    ]


def test_a_bad_table_value_is_a_dead_letter_and_changes_nothing() -> None:
    driver = TestDriver(table_app(history=1_000))
    driver.send("customers", b"c0", region("north"), timestamp=100)
    driver.send("customers", b"c0", {"region": 7}, timestamp=200)
    driver.send("customers", b"c0", b"not json", timestamp=300)
    driver.advance_time(300)
    (first, second) = driver.dead_letters
    assert (first.stage, first.topic, first.offset) == ("decode", "customers", 1)
    assert "region" in first.reason
    assert second.stage == "decode"
    assert versions(driver).items == [(100, region("north"))]


def test_an_app_with_a_table_and_arrival_order_is_refused_naming_the_fix() -> None:
    with pytest.raises(ConfigError, match="input_order: canonical"):
        TestDriver(table_app(order="arrival"))


def test_a_table_alone_needs_no_canonical_order() -> None:
    app = App(app_id="alone", inputs=[{"topic": "customers"}], initial_processors=1)
    app.table("customers", Customer)
    driver = TestDriver(app)
    driver.send("customers", b"c0", region("north"), timestamp=100)
    assert versions(driver).items == [(100, region("north"))]


def test_a_table_that_is_no_input_is_refused() -> None:
    app = App(app_id="missing", inputs=[{"topic": "orders"}], initial_processors=1)
    app.table("customers", Customer)
    app.processor("orders", stores=["customers"])(lambda record, table: None)
    with pytest.raises(ConfigError, match=r"not input topics.*Fix: add them under `inputs`"):
        app.check()


def test_a_processor_for_a_table_is_refused_naming_the_fix() -> None:
    app = table_app()
    with pytest.raises(ValueError, match=r"is a table.*Fix: remove @app.processor\('customers'"):
        app.processor("customers")(lambda record, state: None)
    other = App(app_id="other", inputs=[{"topic": "customers"}], initial_processors=1)
    other.processor("customers")(lambda record, state: None)
    with pytest.raises(ValueError, match=r"already has a processor function.*Fix: remove"):
        other.table("customers", Customer)


def test_a_table_name_is_a_store_name_once() -> None:
    app = App(app_id="names", inputs=[{"topic": "customers"}], initial_processors=1)
    app.store("customers")
    with pytest.raises(ValueError, match="declared twice"):
        app.table("customers", Customer)


def test_a_table_and_time_read_as_of_the_record_in_a_timed_app() -> None:
    """An app that keeps time (a ttl store) runs its functions through its keys' time; the
    table is read there as of the record's event time as well."""
    app = table_app(history=1_000)
    app.store("expiring", ttl=10_000)
    driver = TestDriver(app)
    driver.send("customers", b"c0", region("north"), timestamp=100)
    driver.send("customers", b"c0", region("south"), timestamp=200)
    driver.send("orders", b"c0", order(1), timestamp=150)
    driver.advance_time(10_000)
    assert seen(driver) == "1:north@150,"


@pytest.mark.parametrize("field_times", [False, True])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_same_state_whatever_the_inputs_interleaving(seed: int, field_times: bool) -> None:
    """The same records arriving in other interleavings of the two topics leave the same
    state: the table's versions and what every order read, before and after what waits is
    released. With ``field_times`` the event times are fields and the Kafka timestamps (a
    tombstone's among them) run far ahead of them."""
    sent = drawn(seed, 120, field_times=field_times)
    arrivals = (sent, interleaved(sent, seed))
    drivers = [send(TestDriver(table_app(field_times=field_times)), a) for a in arrivals]
    first, second = (stored(driver.database) for driver in drivers)
    assert first == second
    for driver in drivers:
        driver.advance_time(10**10)
    first, second = (stored(driver.database) for driver in drivers)
    assert first == second
    third = send(TestDriver(table_app(field_times=field_times)), interleaved(sent, seed + 100))
    third.advance_time(10**10)
    assert stored(third.database) == first
    reads = "".join(seen(driver, key) for driver in drivers[:1] for key in KEYS)
    assert reads.count(",") == sum(1 for s in sent if s[0] == "orders")  # (all applied)
    assert ":-@" in reads and ":north@" in reads  # (some read nothing, some a customer)


def test_the_driver_reads_a_tables_value_now_and_as_of_a_time() -> None:
    driver = TestDriver(table_app(history=1_000))
    driver.send("customers", b"c0", region("north"), timestamp=100)
    driver.send("customers", b"c0", region("south"), timestamp=200)
    driver.advance_time(200)
    assert driver.table("customers", b"c0") == Customer(region="south")
    assert driver.table("customers", b"c0", at=150) == Customer(region="north")
    assert driver.table("customers", b"c0", at=50) is None
    assert driver.table("customers", b"c1") is None


@pytest.mark.parametrize("field_times", [False, True])
@pytest.mark.parametrize("cut", [10, 45, 90])
def test_a_driver_going_on_from_the_state_holds_what_one_run_holds(
    cut: int, field_times: bool
) -> None:
    """A processor restarted on its state (or a snapshot's) goes on as if never stopped: the
    versions and what the orders read are the same as one run's (``field_times``: the
    event times are fields, the tombstones' Kafka timestamps far ahead of them)."""
    sent = drawn(11, 120, field_times=field_times)

    def app() -> App:
        return table_app(field_times=field_times)

    whole = send(TestDriver(app()), sent)
    first = send(TestDriver(app()), sent[:cut])
    resumed = send(TestDriver(app(), database=first.database), _unread(first, sent, cut))
    assert stored(resumed.database) == stored(whole.database)
    assert resumed.offsets() == whole.offsets()


def _unread(driver: TestDriver, sent: list[Sent], cut: int) -> list[Sent]:
    """What a processor resuming at ``driver``'s committed offsets reads: the records sent
    past them (held in the merge, not committed) and the rest."""
    offsets = driver.offsets()
    seen: dict[tuple[str, int], int] = {}
    unread = []
    for index, record in enumerate(sent):
        position = home(record[0], record[1])
        offset = seen.get(position, 0)
        seen[position] = offset + 1
        if index >= cut or offset >= offsets.get(position, 0):
            unread.append(record)
    return unread


def test_a_table_whose_store_name_would_be_too_long_or_a_negative_history_is_refused() -> None:
    app = App(app_id="long", inputs=[{"topic": "t" * 90}], initial_processors=1)
    with pytest.raises(ValueError, match="invalid store name"):
        app.table("t" * 90, Customer)
    with pytest.raises(ValueError, match="history of table 'x' must be zero or more"):
        app.table("x", Customer, history=-1)


def _timed_table_app(event_time: object) -> App:
    app = App(
        AppConfig(
            app_id="timed",
            inputs=[TopicConfig(topic="customers")],
            initial_processors=1,
            on_error="dead-letter",
        )
    )
    app.table("customers", dict, history=1_000, event_time=event_time)  # type: ignore[arg-type]
    return app


def test_a_table_record_without_an_event_time_is_a_decode_dead_letter() -> None:
    driver = TestDriver(_timed_table_app("at"))
    driver.send("customers", b"c0", {"region": "north", "at": 100})
    driver.send("customers", b"c0", {"region": "south"})  # no "at"
    (letter,) = driver.dead_letters
    assert (letter.stage, letter.offset) == ("decode", 1)
    assert letter.reason.startswith("no event time")
    assert driver.table("customers", b"c0") == {"region": "north", "at": 100}


def test_a_failing_event_time_function_of_a_table_fails_as_a_function_does() -> None:
    def broken(record: Record[dict[str, object]]) -> int:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):  # (a test fails on the app's bug)
        TestDriver(_timed_table_app(broken)).send("customers", b"c0", {"region": "north"})
    driver = TestDriver(_timed_table_app(broken), on_error="dead-letter")
    driver.send("customers", b"c0", {"region": "north"})
    (letter,) = driver.dead_letters
    assert letter.stage == "processor" and "boom" in letter.reason
    assert driver.table("customers", b"c0") is None
