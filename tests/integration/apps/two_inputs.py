"""A two-input app for ``time.input_order: canonical``: per key, it emits where each record it
applies came from (``"topic@partition@offset"``), in the order it applies them, so the
output topic shows the order; event time is the value's ``at`` field."""

from __future__ import annotations

from pydantic import BaseModel

from framework import App, Output, Record
from statestore import KeyState


class Event(BaseModel):
    """One input record: its event time (ms)."""

    at: int


app = App()
app.store("applied")


@app.processor(value_type=Event, event_time="at", stores=["applied"])
def apply(record: Record[Event], state: KeyState[int]) -> Output:
    """Count the key's records and emit where this one came from."""
    state.set((state.get() or 0) + 1)
    return Output(f"{record.topic}@{record.partition}@{record.offset}")
