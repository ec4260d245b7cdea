"""Per-sensor one-minute average temperatures, with late data.

Input topic ``readings``: key = the sensor id, value = JSON ``{"celsius": 21.5, "at": ms}``
(``at``: when the sensor measured, epoch milliseconds: the event time). Output topic
``minute-averages``: key = the sensor id, value = ``{"start", "end", "value"}`` once per sensor
and minute, when the minute closed: the sensor's time (its newest reading, or a recorded tick
of its partition) passed the minute's end plus 10 s of grace. A reading for a minute that
closed already is a dead letter (stage ``late``, with how late) in ``readings-dead-letters``.

Run: splitstate run examples.sensors.app:app --all
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel

from framework import App, Mean, Record, Tumbling


class Reading(BaseModel):
    """One measurement."""

    celsius: float
    at: int  # epoch milliseconds


app = App(config_file=Path(__file__).with_name("config.yaml"))


@app.window(
    "readings",
    Tumbling(timedelta(minutes=1), grace=timedelta(seconds=10)),
    Mean(),
    value_type=Reading,
    event_time="at",
)
def minute_mean(record: Record[Reading]) -> float:
    """The value each reading adds to its minute's mean."""
    return record.value.celsius
