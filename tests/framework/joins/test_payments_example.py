"""examples/payments through the broker-free test driver: each payment matched once to the
orders of its key placed within 10 minutes before it, whichever arrived first; a payment
without one written alone once no order can match it any more."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from examples.payments.app import app
from framework import AppConfig
from framework.testing import TestDriver

MINUTE = 60_000


@pytest.fixture
def driver() -> Iterator[TestDriver]:
    yield TestDriver(app, AppConfig.load(app.config_file))


def matched(driver: TestDriver) -> list[tuple[str, str | None]]:
    return [(v["payment_id"], v["order_id"]) for v in driver.output_values("matched-payments")]


def test_a_payment_is_matched_to_its_order_within_ten_minutes(driver: TestDriver) -> None:
    driver.send("orders", b"o-1", {"order_id": "o-1", "amount": 12.5}, timestamp=0)
    driver.send("payments", b"o-1", {"payment_id": "p-1", "amount": 12.5}, timestamp=9 * MINUTE)
    driver.send("payments", b"o-1", {"payment_id": "p-2", "amount": 1}, timestamp=11 * MINUTE)
    driver.advance_time(60 * MINUTE)
    assert matched(driver) == [("p-1", "o-1"), ("p-2", None)]
    first = driver.output_values("matched-payments")[0]
    assert (first["paid_at"], first["ordered_at"], first["due"]) == (9 * MINUTE, 0, 12.5)


def test_a_payment_that_arrives_before_its_order_is_matched_once(driver: TestDriver) -> None:
    driver.send("payments", b"o-2", {"payment_id": "p-1", "amount": 3}, timestamp=5 * MINUTE)
    driver.send("orders", b"o-2", {"order_id": "o-2", "amount": 3}, timestamp=4 * MINUTE)
    driver.advance_time(60 * MINUTE)
    assert matched(driver) == [("p-1", "o-2")]


def test_an_order_too_late_for_the_grace_is_a_late_dead_letter(driver: TestDriver) -> None:
    driver.send("orders", b"o-3", {"order_id": "o-3", "amount": 3}, timestamp=20 * MINUTE)
    driver.send("payments", b"o-3", {"payment_id": "p-1", "amount": 3}, timestamp=20 * MINUTE)
    driver.send("orders", b"o-3", {"order_id": "x", "amount": 3}, timestamp=15 * MINUTE)
    driver.advance_time(60 * MINUTE)
    assert matched(driver) == [("p-1", "o-3")]
    (letter,) = driver.dead_letters
    assert (letter.stage, letter.topic) == ("late", "orders")


def test_the_matches_are_the_same_after_a_restart_on_the_state(driver: TestDriver) -> None:
    driver.send("orders", b"o-4", {"order_id": "o-4", "amount": 3}, timestamp=0)
    driver.advance_time(1)
    resumed = TestDriver(app, AppConfig.load(app.config_file), database=driver.database)
    resumed.send("payments", b"o-4", {"payment_id": "p-1", "amount": 3}, timestamp=MINUTE)
    resumed.advance_time(60 * MINUTE)
    assert matched(driver) + matched(resumed) == [("p-1", "o-4")]
