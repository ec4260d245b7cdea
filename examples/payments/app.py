"""Payments matched to their orders within 10 minutes: an interval (stream-stream) join.

Input topics, both keyed by the order id (and written with ``SplitstateProducer``, so linear
hashing places an order and its payments on the same processor):

- ``payments``: value JSON ``{"payment_id": "p-1", "amount": 12.5}``;
- ``orders``: value JSON ``{"order_id": "o-1", "amount": 12.5}``.

A payment matches an order of its key placed at most 10 minutes before it (and not after
it), by event time (the Kafka timestamps). Each match is written to ``matched-payments``
once, when the second of the two is applied; a payment that no order can match any more
(the key's time, or a recorded tick, passed its time plus the grace) is written with
``"order_id": null``. The config orders the two inputs canonically, so the matches are the
same live, after a restart, on replay and through a scale's catch-up.

Run: splitstate run examples.payments.app:app --all
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel

from framework import App, Output, Record

WITHIN = timedelta(minutes=10)
#: how far a record may come behind its key's time and still be matched
GRACE = timedelta(minutes=1)


class Payment(BaseModel):
    """One payment."""

    payment_id: str
    amount: float


class Order(BaseModel):
    """One order."""

    order_id: str
    amount: float


app = App(config_file=Path(__file__).with_name("config.yaml"))


@app.interval_join(
    "payments",
    "orders",
    before=WITHIN,
    after=timedelta(0),
    grace=GRACE,
    how="left",
    left_type=Payment,
    right_type=Order,
)
def match(payment: Record[Payment], order: Record[Order] | None) -> Output:
    """The payment with its order (``None``: no order of its key within 10 minutes before)."""
    return Output(
        {
            "payment_id": payment.value.payment_id,
            "order_id": order.value.order_id if order else None,
            "paid": payment.value.amount,
            "due": order.value.amount if order else None,
            "paid_at": payment.timestamp,
            "ordered_at": order.timestamp if order else None,
        }
    )


if __name__ == "__main__":
    app.run()
