"""The revenue example (``group_by`` + an hourly window) does what its docstring says,
broker-free: each region's hours summed once, whatever the interleaving of the customers'
records (within the window's grace), and the result is a function of the internal topic."""

from __future__ import annotations

from typing import Any

from examples.revenue.app import app as revenue
from examples.revenue.app import by_region
from framework import AppConfig, TestDriver

HOUR = 3_600_000
Order = tuple[bytes, dict[str, Any]]


def _orders() -> list[Order]:
    """Four customers' orders in two regions over three hours, in event-time order; a
    customer may order in either region."""
    customers = [b"alice", b"bob", b"carol", b"dave"]
    orders: list[Order] = []
    for step in range(36):  # one order every 5 minutes, 10 s apart within a step
        at = step * 300_000 + 10_000
        customer = customers[step % 4]
        region = "eu" if step % 3 else "us"
        orders.append((customer, {"region": region, "amount": step + 1, "at": at}))
    return orders


def _run(orders: list[Order]) -> TestDriver:
    driver = TestDriver(revenue, AppConfig.load(revenue.config_file))
    for customer, order in orders:
        driver.send("orders", customer, order)
    driver.advance_time(5 * HOUR)
    return driver


def _hours(driver: TestDriver) -> list[tuple[bytes, bytes | None]]:
    return sorted((o.key, o.value) for o in driver.outputs())


def _expected(orders: list[Order]) -> list[tuple[bytes, bytes | None]]:
    sums: dict[tuple[str, int], float] = {}
    for _, order in orders:
        where = (order["region"], order["at"] // HOUR)
        sums[where] = sums.get(where, 0.0) + order["amount"]
    return sorted(
        (region.encode(), f'{{"start":{h * HOUR},"end":{(h + 1) * HOUR},"value":{v}}}'.encode())
        for (region, h), v in sums.items()
    )


def test_each_regions_hours_are_summed_once_when_they_close() -> None:
    orders = _orders()
    driver = _run(orders)
    assert driver.dead_letters == []
    assert _hours(driver) == _expected(orders)
    assert len(driver.outputs(by_region.topic)) == len(orders)


def test_two_interleavings_of_the_customers_give_the_same_hours() -> None:
    orders = _orders()
    swapped = list(orders)
    for i in range(0, len(swapped) - 1, 2):  # each pair of customers' orders the other way
        swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
    first, second = _run(orders), _run(swapped)
    assert [o.key for o in first.outputs(by_region.topic)] != [
        o.key for o in second.outputs(by_region.topic)
    ], "the internal topic got the new keys' records in another order"
    assert _hours(first) == _hours(second) == _expected(orders)


def test_the_hours_follow_from_the_internal_topic_alone() -> None:
    """What the next stage computes depends only on the internal topic's records, in the
    order written there (decided once, by the broker, and read again by any replay): a
    driver fed that topic alone computes the same hours and the same late records. Here a
    customer's orders an hour behind the region's time are late (the interleaving of the
    customers decided that), and stay late when the internal topic is read again."""
    orders = _orders()
    behind = [o for o in orders if o[0] == b"bob"] + [o for o in orders if o[0] != b"bob"]
    live = _run(behind)
    assert live.dead_letters, "bob's orders came first: the others' early hours were late"
    assert {d.stage for d in live.dead_letters} == {"late"}
    again = TestDriver(revenue, AppConfig.load(revenue.config_file))
    for output in live.outputs(by_region.topic):
        headers = [
            (k, v if isinstance(v, bytes | None) else v.encode()) for k, v in output.headers or []
        ]
        again.send(by_region.topic, output.key, output.value, headers)
    again.advance_time(5 * HOUR)
    assert _hours(again) == _hours(live)
    assert [(d.stage, d.key) for d in again.dead_letters] == [
        (d.stage, d.key) for d in live.dead_letters
    ]


def test_a_tick_of_the_source_closes_no_window_of_the_new_keys() -> None:
    """The source's keys (customers) keep no time; the regions living at the same partition
    number of the internal topic are other keys: a tick of ``orders`` (its floor is the
    source partition's, not the region's) applies to none of them."""
    driver = TestDriver(revenue, AppConfig.load(revenue.config_file))
    for customer, order in _orders()[:12]:
        driver.send("orders", customer, order)
    for partition in range(4):
        driver.tick("orders", partition, 100 * HOUR)
    assert driver.outputs() == []
    driver.tick(by_region.topic, 0, 100 * HOUR)
    driver.tick(by_region.topic, 1, 100 * HOUR)
    driver.tick(by_region.topic, 2, 100 * HOUR)
    driver.tick(by_region.topic, 3, 100 * HOUR)
    assert _hours(driver) == _expected(_orders()[:12])


def test_the_source_partitions_time_is_the_orders_event_time() -> None:
    driver = TestDriver(revenue, AppConfig.load(revenue.config_file))
    assert revenue.handler("orders").event_time == "at"
    driver.send("orders", b"alice", {"region": "eu", "amount": 1, "at": 5 * HOUR}, timestamp=7)
    assert driver.outputs(by_region.topic)[0].headers == [("splitstate.event-time", b"18000000")]
