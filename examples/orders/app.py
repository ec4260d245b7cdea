"""Orders enriched with their customer: a stream read against a table, as of each order's time.

Input topics, both keyed by the customer id (and written with ``SplitstateProducer``, so
linear hashing places a customer's orders and its record on the same processor):

- ``customers``, a table (``app.table``): value JSON ``{"name": "Ada", "region": "north"}``;
  a record with no value (a tombstone) deletes the customer. Versions are kept for 7 days
  before the customer's latest change, so an order reads the customer as it was then.
- ``orders``: value JSON ``{"order_id": "o-1", "amount": 12.5}``.

Each order is written to ``enriched-orders`` with the customer's name and region as of the
order's event time (its Kafka timestamp), or ``null`` when the customer was unknown (or
deleted) then. The config orders the two inputs canonically, so a customer's change and an
order meet in the same order live, on replay, from a snapshot and in a Spark build.

Run: splitstate run examples.orders.app:app --all
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel

from framework import App, KeyTable, Output, Record

HISTORY = timedelta(days=7)


class Customer(BaseModel):
    """A customer as the ``customers`` table holds it."""

    name: str
    region: str


class Order(BaseModel):
    """One order."""

    order_id: str
    amount: float


app = App(config_file=Path(__file__).with_name("config.yaml"))
app.table("customers", Customer, history=HISTORY)


@app.processor("orders", value_type=Order, stores=["customers"])
def enrich(record: Record[Order], customers: KeyTable[Customer]) -> Output:
    """The order with its customer as of the order's time (``None`` when unknown then)."""
    customer = customers.get()
    return Output(
        {
            "order_id": record.value.order_id,
            "amount": record.value.amount,
            "customer": record.key_text,
            "name": customer.name if customer else None,
            "region": customer.region if customer else None,
        }
    )


if __name__ == "__main__":
    app.run()
