"""An app for records Kafka or the process cannot take: each record asks for an output padded
to a size, or for the process to be killed while the function runs on it."""

from __future__ import annotations

import os
import signal

from pydantic import BaseModel

from framework import App, Output, Record
from statestore import KeyState


class Ask(BaseModel):
    """What a record asks the function for."""

    pad: int = 0
    die: bool = False


app = App()
app.store("seen")


@app.processor(value_type=Ask)
def handle(record: Record[Ask], state: KeyState[int]) -> Output:
    """Count the key's records; output the count padded by ``pad`` bytes, or die."""
    if record.value.die:
        os.kill(os.getpid(), signal.SIGKILL)
    count = (state.get() or 0) + 1
    state.set(count)
    return Output({"key": record.key_text, "n": count, "pad": "x" * record.value.pad})
