"""A two-input app whose state is the order it applied each key's records in: per key, it
appends ``"topic@partition@offset,"`` of each record it applies and emits the whole state, so
a key's last output is its state (a receiver's rebuilt one too, once it applies a record past
F); event time is the value's ``at`` field."""

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
def apply(record: Record[Event], state: KeyState[str]) -> Output:
    """Append where the record came from; emit the key's state."""
    applied = f"{state.get() or ''}{record.topic}@{record.partition}@{record.offset},"
    state.set(applied)
    return Output(applied)
