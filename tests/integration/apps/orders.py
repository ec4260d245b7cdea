"""examples/orders on the real broker: the example's models and function, with topic names
prefixed by ``ORDERS_TOPIC_PREFIX`` (each test run its own topics) and event times from the
values' ``at`` field (a test sets them; the example uses the Kafka timestamp)."""

from __future__ import annotations

import os

from examples.orders.app import HISTORY, Customer, Order, enrich
from framework import App

PREFIX = os.environ.get("ORDERS_TOPIC_PREFIX", "")
CUSTOMERS, ORDERS = f"{PREFIX}customers", f"{PREFIX}orders"


class TimedCustomer(Customer):
    """A customer record with its event time (ms)."""

    at: int


class TimedOrder(Order):
    """An order with its event time (ms)."""

    at: int


app = App()
app.table(CUSTOMERS, TimedCustomer, history=HISTORY, event_time="at")
app.processor(ORDERS, value_type=TimedOrder, stores=[CUSTOMERS], event_time="at")(enrich)
