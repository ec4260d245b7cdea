"""examples/payments on the real broker: the example's models, window and function, with
topic names prefixed by ``PAYMENTS_TOPIC_PREFIX`` (each test run its own topics) and event
times from the values' ``at`` field (a test sets them; the example uses the Kafka
timestamp)."""

from __future__ import annotations

import os
from datetime import timedelta

from examples.payments.app import GRACE, WITHIN, Order, Payment, match
from framework import App

PREFIX = os.environ.get("PAYMENTS_TOPIC_PREFIX", "")
PAYMENTS, ORDERS = f"{PREFIX}payments", f"{PREFIX}orders"


class TimedPayment(Payment):
    """A payment with its event time (ms)."""

    at: int


class TimedOrder(Order):
    """An order with its event time (ms)."""

    at: int


app = App()
app.interval_join(
    PAYMENTS,
    ORDERS,
    before=WITHIN,
    after=timedelta(0),
    grace=GRACE,
    how="left",
    left_type=TimedPayment,
    right_type=TimedOrder,
    left_time="at",
    right_time="at",
)(match)
