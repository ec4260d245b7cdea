"""A counting app whose function takes a millisecond per record, so that a catch-up lasts
long enough to be watched from outside (``tests/integration/test_metrics_endpoint.py``)."""

from __future__ import annotations

import time

from framework import App, Output, Record
from statestore import KeyState

app = App()
app.store("counts")


@app.processor()
def count(record: Record[bytes | None], state: KeyState[int]) -> Output:
    """Count the key's records (slowly); output the count."""
    time.sleep(0.001)
    total = (state.get() or 0) + 1
    state.set(total)
    return Output({"key": record.key_text, "count": total})
