"""A test app whose state is the journal of every record applied to a key: where it was,
its timestamp, headers and value, in the order applied. A record with value ``boom`` fails
after changing state (the change must be rolled back)."""

from __future__ import annotations

from typing import Any

from framework import App, AppConfig, Output, Record
from statestore import KeyState

config = AppConfig.load(
    None,
    app_id="journal",
    kafka={"bootstrap_servers": "127.0.0.1:9"},
    inputs=[{"topic": "events", "partitions": 2}, {"topic": "notes", "partitions": 2}],
    outputs=[{"topic": "journal-out", "partitions": 1}],
    initial_processors=2,
    processors=2,
    spark={"shards": 3},
)
app = App(config)
app.store("journal")


@app.processor()
def note(record: Record[bytes | None], state: KeyState[list[Any]]) -> Output:
    """Append the record to its key's journal."""
    headers = [[name, None if value is None else value.hex()] for name, value in record.headers]
    value = None if record.value is None else record.value.hex()
    entry = [record.topic, record.partition, record.offset, record.timestamp, headers, value]
    journal = [*(state.get() or []), entry]
    state.set(journal)
    if record.value == b"boom":
        raise ValueError("boom")
    return Output({"entries": len(journal)})
