"""examples/orders through the broker-free test driver: each order gets its customer as of
the order's time, whichever of the two arrived first."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from examples.orders.app import app
from framework import AppConfig
from framework.testing import TestDriver

DAY = 86_400_000


@pytest.fixture
def driver() -> Iterator[TestDriver]:
    yield TestDriver(app, AppConfig.load(app.config_file))


def test_an_order_gets_its_customer_as_of_its_time(driver: TestDriver) -> None:
    driver.send("customers", b"cust-1", {"name": "Ada", "region": "north"}, timestamp=1_000)
    driver.send("orders", b"cust-1", {"order_id": "o-1", "amount": 12.5}, timestamp=2_000)
    driver.send("customers", b"cust-1", {"name": "Ada", "region": "south"}, timestamp=3_000)
    driver.send("orders", b"cust-1", {"order_id": "o-2", "amount": 5}, timestamp=4_000)
    driver.send("orders", b"cust-2", {"order_id": "o-3", "amount": 1}, timestamp=4_500)
    driver.advance_time(10 * DAY)  # (what waits for the other input is released)
    assert driver.output_values("enriched-orders") == [
        {"order_id": "o-1", "amount": 12.5, "customer": "cust-1", "name": "Ada", "region": "north"},
        {"order_id": "o-2", "amount": 5.0, "customer": "cust-1", "name": "Ada", "region": "south"},
        {"order_id": "o-3", "amount": 1.0, "customer": "cust-2", "name": None, "region": None},
    ]


def test_a_customer_record_arriving_after_a_later_order_is_read_by_it(
    driver: TestDriver,
) -> None:
    """The order (time 5000) arrives before the customer's record (time 4000): the canonical
    order applies the customer first, as a replay of the two topics would."""
    driver.send("orders", b"cust-1", {"order_id": "o-1", "amount": 3}, timestamp=5_000)
    driver.send("customers", b"cust-1", {"name": "Bo", "region": "east"}, timestamp=4_000)
    driver.advance_time(10 * DAY)
    (enriched,) = driver.output_values("enriched-orders")
    assert enriched["region"] == "east"


def test_a_deleted_customer_is_unknown_to_later_orders_only(driver: TestDriver) -> None:
    driver.send("customers", b"cust-1", {"name": "Cy", "region": "west"}, timestamp=1_000)
    driver.send("customers", b"cust-1", None, timestamp=2_000)  # a tombstone
    driver.send("orders", b"cust-1", {"order_id": "late", "amount": 1}, timestamp=3_000)
    driver.send("orders", b"cust-1", {"order_id": "early", "amount": 1}, timestamp=1_500)
    driver.advance_time(10 * DAY)
    assert [(o["order_id"], o["name"]) for o in driver.output_values("enriched-orders")] == [
        ("late", None),
        ("early", "Cy"),
    ]


def test_a_customer_that_is_no_customer_is_a_dead_letter(driver: TestDriver) -> None:
    driver.send("customers", b"cust-1", {"name": "Di"}, timestamp=1_000)  # no region
    driver.advance_time(10 * DAY)
    (letter,) = driver.dead_letters
    assert (letter.stage, letter.topic) == ("decode", "customers")
