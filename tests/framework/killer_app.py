"""A test app whose function kills its process on some records, as a segfault or an
out-of-memory kill would: a value ``die:PATH`` appends a line to ``PATH`` (so a test can
count the deaths), then exits the process without unwinding (``os._exit``). Any other value
is counted into its key's state: ``{"n": records applied, "sum": sum of the values}``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from framework import App, AppConfig, Record
from statestore import KeyState

PARTITIONS = 2


def make_app(on_error: Literal["dead-letter", "stop"] = "dead-letter", crash_limit: int = 3) -> App:
    """The app, with ``on_error`` and ``crash_limit``."""
    config = AppConfig.load(
        None,
        app_id="killer",
        kafka={"bootstrap_servers": "127.0.0.1:9"},
        inputs=[{"topic": "events", "partitions": PARTITIONS}],
        outputs=[],
        initial_processors=2,
        processors=2,
        on_error=on_error,
        crash_limit=crash_limit,
        spark={"shards": 3},
    )
    app = App(config)
    app.store("counts")

    @app.processor()
    def count(record: Record[bytes | None], state: KeyState[dict[str, Any]]) -> None:
        """Count the record, or die on it."""
        value = (record.value or b"").decode()
        if value.startswith("die:"):
            with Path(value.removeprefix("die:")).open("a") as deaths:
                deaths.write(f"{record.topic}[{record.partition}]@{record.offset}\n")
            os._exit(3)
        current = state.get() or {"n": 0, "sum": 0}
        state.set({"n": current["n"] + 1, "sum": current["sum"] + int(value)})

    return app


#: for ``splitstate ... tests.framework.killer_app:app --config FILE``
app = make_app()
