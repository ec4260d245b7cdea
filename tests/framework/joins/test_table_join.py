"""The table-table join (``App.table_join``) through ``TestDriver``: called on either
table's change with both newest values, inner, left and outer as Kafka Streams' KTable join,
the same in any interleaving of the two tables."""

from __future__ import annotations

import random
from typing import Any

import pytest
from pydantic import BaseModel

from framework import App, AppConfig, Output, Record
from framework.config import TopicConfig
from framework.config_time import TimeConfig
from framework.joins import JoinType
from framework.testing import TestDriver


class Customer(BaseModel):
    name: str


class Limit(BaseModel):
    amount: int


def limits_app(how: JoinType = "inner", history: int = 0, *, fail_on: str = "") -> App:
    app = App(
        AppConfig(
            app_id="limits",
            inputs=[TopicConfig(topic="customers"), TopicConfig(topic="limits")],
            outputs=[TopicConfig(topic="customer-limits")],
            initial_processors=1,
            time=TimeConfig(input_order="canonical"),
        )
    )
    app.table("customers", Customer, history=history)
    app.table("limits", Limit, history=history)

    @app.table_join("customers", "limits", how=how)
    def joined(record: Record[Any], customer: Customer | None, limit: Limit | None) -> Output:
        if customer is not None and customer.name == fail_on:
            raise RuntimeError("no")
        return Output(
            {
                "by": record.topic,
                "name": customer.name if customer else None,
                "limit": limit.amount if limit else None,
            }
        )

    return app


def changes(driver: TestDriver) -> list[tuple[str, str | None, int | None]]:
    return [(v["by"], v["name"], v["limit"]) for v in driver.output_values()]


def _steps(driver: TestDriver) -> TestDriver:
    driver.send("limits", b"c1", {"amount": 10}, timestamp=1_000)
    driver.send("customers", b"c1", {"name": "Ada"}, timestamp=2_000)
    driver.send("limits", b"c1", {"amount": 20}, timestamp=3_000)
    driver.send("limits", b"c1", None, timestamp=4_000)  # deleted
    driver.send("limits", b"c1", None, timestamp=4_500)  # (deleted again)
    driver.send("customers", b"c1", {"name": "Bo"}, timestamp=5_000)
    driver.send("customers", b"c1", None, timestamp=6_000)
    driver.advance_time(10_000)
    return driver


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        (
            "inner",
            [
                ("customers", "Ada", 10),
                ("limits", "Ada", 20),
                ("limits", "Ada", None),  # the pair's deletion
            ],
        ),
        (
            "left",
            [
                ("customers", "Ada", 10),
                ("limits", "Ada", 20),
                ("limits", "Ada", None),
                ("limits", "Ada", None),
                ("customers", "Bo", None),
                ("customers", None, None),
            ],
        ),
        (
            "outer",
            [
                ("limits", None, 10),
                ("customers", "Ada", 10),
                ("limits", "Ada", 20),
                ("limits", "Ada", None),
                ("limits", "Ada", None),
                ("customers", "Bo", None),
                ("customers", None, None),
            ],
        ),
    ],
)
def test_inner_left_and_outer(how: str, expected: list[tuple[str, str | None, int | None]]) -> None:
    assert changes(_steps(TestDriver(limits_app(how)))) == expected  # type: ignore[arg-type]


def test_a_record_older_than_the_newest_version_changes_no_newest_value() -> None:
    driver = TestDriver(limits_app(history=10_000))
    driver.send("customers", b"c1", {"name": "Ada"}, timestamp=1_000)
    driver.send("limits", b"c1", {"amount": 10}, timestamp=2_000)
    driver.send("limits", b"c1", {"amount": 5}, timestamp=1_500)  # older: a version between
    driver.send("limits", b"c1", {"amount": 30}, timestamp=2_000)  # at the newest's time
    driver.advance_time(10_000)
    assert changes(driver) == [("limits", "Ada", 10), ("limits", "Ada", 30)]


def test_any_interleaving_of_the_tables_gives_the_same_calls() -> None:
    rng = random.Random(3)
    sent = []
    clocks = {"customers": 0, "limits": 0}
    for n in range(150):
        topic = rng.choice(list(clocks))
        clocks[topic] += rng.randint(0, 20)
        value: Any = (
            None
            if rng.random() < 0.15
            else ({"name": f"n{n}"} if topic == "customers" else {"amount": n})
        )
        sent.append((topic, rng.choice([b"c1", b"c2", b"c3"]), clocks[topic], value))
    results = []
    for seed in (None, 1, 2):
        arrival = list(sent)
        if seed is not None:
            queues = {t: [s for s in sent if s[0] == t] for t in clocks}
            pick = random.Random(seed)
            arrival = []
            while any(queues.values()):
                arrival.append(queues[pick.choice([t for t in queues if queues[t]])].pop(0))
        driver = TestDriver(limits_app("outer"))
        for topic, key, at, value in arrival:
            driver.send(topic, key, value, timestamp=at)
        driver.advance_time(100_000)
        results.append([(o.key, o.value) for o in driver.outputs()])
    assert results[0] == results[1] == results[2]
    assert len(results[0]) == 150  # (outer: one call per change)


def test_a_failing_function_is_a_dead_letter_and_the_change_is_undone() -> None:
    driver = TestDriver(limits_app(fail_on="Cy"), on_error="dead-letter")
    driver.send("limits", b"c1", {"amount": 10}, timestamp=1_000)
    driver.send("customers", b"c1", {"name": "Cy"}, timestamp=2_000)
    driver.advance_time(10_000)
    (letter,) = driver.dead_letters
    assert (letter.stage, letter.topic) == ("processor", "customers")
    assert driver.table("customers", b"c1") is None  # (not applied)
    assert changes(driver) == []
