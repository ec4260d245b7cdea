"""A changelog table: the latest value per key, a tombstone (no value) deletes the key. The
shape of an app reading a compacted input (``tests/integration/test_compacted_history.py``)."""

from __future__ import annotations

from framework import App, Record
from statestore import KeyState

app = App()
app.store("latest", str)


@app.processor(value_type=str)
def latest(record: Record[str | None], state: KeyState[str]) -> None:
    """Keep the record's value as the key's, or forget the key on a tombstone."""
    if record.value is None:
        state.delete()
    else:
        state.set(record.value)
