"""examples/revenue on the real broker: the example's group_by and hourly window, for the app
id in ``REVENUE_APP_ID`` (each test run its own app, so its own internal topic) and topic
names prefixed by ``REVENUE_TOPIC_PREFIX``."""

from __future__ import annotations

import os

from examples.revenue.app import Order, hourly_revenue
from examples.revenue.app import app as example
from framework import App

PREFIX = os.environ.get("REVENUE_TOPIC_PREFIX", "")
ORDERS = f"{PREFIX}orders"

#: the internal topic: named after the app id the test's config gives
INTERNAL = f"{os.environ.get('REVENUE_APP_ID', 'revenue')}-repartition-by-region"

app = App()
by_region = app.group_by(
    ORDERS, lambda record: record.value.region, name="by-region", value_type=Order,
    event_time="at",
)  # fmt: skip
window = example.windows["hourly_revenue"]
app.window(
    INTERNAL,
    window.kind,
    window.aggregation,
    value_type=Order,
    event_time=by_region.event_time,
)(hourly_revenue)
