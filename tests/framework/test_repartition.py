"""``App.group_by``: re-keying an input through the app's internal topic, read back by the
next stage of the same app (broker-free, through TestDriver)."""

from __future__ import annotations

from typing import Any

import pytest

from framework import App, ConfigError, KeyState, Output, Record, TestDriver
from framework.repartition import EVENT_TIME_HEADER, internal_topic

INTERNAL = "shop-repartition-by-region"


def _app(inputs: list[str] | None = None, outputs: list[str] | None = None, **settings: Any) -> App:
    app = App(
        app_id="shop",
        inputs=inputs or ["orders", INTERNAL],
        outputs=outputs or ["totals"],
        initial_processors=2,
        **settings,
    )
    app.store("total")
    return app


def _counting_app() -> App:
    """orders keyed by customer -> group_by region -> a running total per region."""
    app = _app()
    spec = app.group_by("orders", lambda record: record.value["region"], name="by-region",
                        value_type=dict)  # fmt: skip
    assert spec.topic == INTERNAL == internal_topic("shop", "by-region")

    @app.processor(INTERNAL, dict, stores=["total"])
    def add(record: Record[dict[str, Any]], state: KeyState[float]) -> Output:
        total = (state.get() or 0) + record.value["amount"]
        state.set(total)
        return Output({"region": record.key.decode(), "total": total})

    return app


def test_a_two_stage_app_reads_back_what_its_group_by_wrote_keyed_by_the_new_key() -> None:
    driver = TestDriver(_counting_app())
    driver.send("orders", b"alice", {"region": "eu", "amount": 10}, timestamp=5)
    driver.send("orders", b"bob", {"region": "eu", "amount": 2}, timestamp=6)
    driver.send("orders", b"carol", {"region": "us", "amount": 7}, timestamp=7)
    written = driver.outputs(INTERNAL)
    assert [(o.key, o.origin[0] if o.origin else None) for o in written] == [
        (b"eu", "orders"),
        (b"eu", "orders"),
        (b"us", "orders"),
    ]
    assert written[0].value == b'{"region":"eu","amount":10}'  # the value as it was read
    assert written[0].headers == [(EVENT_TIME_HEADER, b"5")]  # its event time crosses
    assert driver.output_values() == [
        {"region": "eu", "total": 10},
        {"region": "eu", "total": 12},
        {"region": "us", "total": 7},
    ]
    assert driver.state("total", b"eu") == 12
    assert driver.state("total", b"alice") is None  # nothing is kept under the old key
    # the internal topic is read like any input: each new key on its linear-hashing partition
    internal = {p: n for (t, p), n in driver.offsets().items() if t == INTERNAL}
    assert sum(internal.values()) == 3


def test_group_by_takes_the_source_records_event_time_for_the_next_stage() -> None:
    app = _app()
    spec = app.group_by("orders", lambda record: record.value["region"], name="by-region",
                        value_type=dict, event_time="at")  # fmt: skip
    seen: list[int] = []

    @app.processor(INTERNAL, dict, stores=[], event_time=spec.event_time)
    def note(record: Record[dict[str, Any]], _state: Any) -> None:
        seen.append(spec.event_time(record))

    TestDriver(app).send("orders", b"alice", {"region": "eu", "at": 1234}, timestamp=99)
    assert seen == [1234]


def test_the_internal_topic_must_be_an_input_and_not_an_output() -> None:
    app = _app(inputs=["orders"])
    app.group_by("orders", lambda record: b"x", name="by-region")
    with pytest.raises(ConfigError, match="not an input"):
        app.check()
    with pytest.raises(ConfigError, match="listed twice"):  # (the config refuses it)
        _app(outputs=["totals", INTERNAL]).check()


def test_a_group_by_name_is_declared_once_and_its_source_gets_no_other_function() -> None:
    app = _app()
    app.group_by("orders", lambda record: b"x", name="by-region")
    with pytest.raises(ValueError, match="declared twice"):
        app.group_by("orders", lambda record: b"y", name="by-region")
    with pytest.raises(ValueError, match="already registered"):
        app.group_by("orders", lambda record: b"y", name="other")


def test_a_key_function_giving_neither_text_nor_bytes_is_the_apps_failure() -> None:
    app = _app()
    app.group_by("orders", lambda record: 42, name="by-region")  # type: ignore[arg-type,return-value]

    @app.processor(INTERNAL, stores=[])
    def ignore(record: Record[bytes], _state: Any) -> None:
        return None

    with pytest.raises(TypeError, match="not bytes or str"):
        TestDriver(app).send("orders", b"alice", b"{}")
    driver = TestDriver(app, on_error="dead-letter")
    driver.send("orders", b"alice", b"{}")
    assert [d.stage for d in driver.dead_letters] == ["processor"]
    assert driver.outputs(INTERNAL) == []


def test_group_by_is_refused_where_its_internal_topic_cannot_be_read_exactly_yet() -> None:
    app = _app(processing_guarantee="at-least-once")
    app.group_by("orders", lambda record: b"x", name="by-region")
    with pytest.raises(ConfigError, match="needs processing_guarantee: exactly-once"):
        app.check()
    app = _app(time={"input_order": "canonical"})
    app.group_by("orders", lambda record: b"x", name="by-region")
    with pytest.raises(ConfigError, match="canonical is not supported yet"):
        app.check()
