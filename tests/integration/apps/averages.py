"""Per sensor, the mean of each 10-second tumbling window of its readings, by the event time
in each reading (``t``, ms); a window closes 2 s after its end (grace) and its mean is emitted
once. A reading whose window closed already is late: a dead letter, stage ``late``."""

from __future__ import annotations

from pydantic import BaseModel

from framework import App, Record
from framework.time import KeyWindows, Mean, Tumbling

#: the window: 10 s, closed 2 s after its end
WINDOW = Tumbling(10_000, grace=2_000)


class Reading(BaseModel):
    """One reading: its event time ``t`` (ms), its value ``v`` and a number ``n`` unique in
    the run (so each dead letter names the reading it was)."""

    t: int
    v: float
    n: int


app = App()
app.windows_store("averages", WINDOW, Mean())


@app.processor(value_type=Reading, stores=["averages"], event_time="t")
def average(record: Record[Reading], windows: KeyWindows) -> None:
    """Add the reading's value to its window."""
    windows.add(record.value.v)
