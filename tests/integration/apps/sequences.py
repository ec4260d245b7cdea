"""An app that checks per-key order: each producer writes strictly increasing sequence numbers
per key; a record that is not the next one of its (key, producer) fails (a dead letter naming
what was expected), so an empty dead-letter topic means every key was processed in order with
none missing."""

from __future__ import annotations

from pydantic import BaseModel

from framework import App, Output, Record
from statestore import KeyState


class Event(BaseModel):
    """One record: who produced it and its sequence number for this key."""

    producer: str
    seq: int


app = App()
app.store("last")


@app.processor(value_type=Event)
def check(record: Record[Event], state: KeyState[dict[str, int]]) -> Output:
    """Accept only the next sequence number of the record's (key, producer)."""
    event = record.value
    last = state.get() or {}
    expected = last.get(event.producer, 0) + 1
    if event.seq != expected:
        raise ValueError(
            f"key {record.key_text}: producer {event.producer} sent {event.seq}, expected "
            f"{expected} (partition {record.partition}, offset {record.offset})"
        )
    state.set({**last, event.producer: event.seq})
    return Output({"key": record.key_text, "producer": event.producer, "seq": event.seq})
