"""Revenue per region per hour: orders keyed by customer, re-keyed by region, summed hourly.

Input topic ``orders``: key = the customer id, value = JSON ``{"region": "eu", "amount": 12.5,
"at": ms}`` (``at``: when the order was placed, epoch milliseconds: the event time).
``group_by`` re-keys each order by its region into the app's internal topic
``revenue-repartition-by-region`` (an input of the app too), and an hourly tumbling window sums
each region's amounts there. Output topic ``revenue-per-region-hour``: key = the region, value =
``{"start", "end", "value"}`` once per region and hour, when the hour closed (the region's
time, its newest order or a recorded tick of its partition, passed the hour's end plus one
minute of grace).

Run: splitstate run examples.revenue.app:app --all
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel

from framework import App, Record, Sum, Tumbling


class Order(BaseModel):
    """One order."""

    region: str
    amount: float
    at: int  # epoch milliseconds


app = App(config_file=Path(__file__).with_name("config.yaml"))

#: orders re-keyed by region, into the app's internal topic revenue-repartition-by-region
by_region = app.group_by(
    "orders",
    lambda record: record.value.region,
    name="by-region",
    value_type=Order,
    event_time="at",
)


@app.window(
    by_region.topic,
    Tumbling(timedelta(hours=1), grace=timedelta(minutes=1)),
    Sum(),
    value_type=Order,
    event_time=by_region.event_time,
)
def hourly_revenue(record: Record[Order]) -> float:
    """The amount each order adds to its region's hour."""
    return record.value.amount
