"""The app's own processor function as a Spark bootstrap ``Fold``.

Spark ships ``AppFold`` (and with it the ``App``: its stores, processor functions and config)
to its workers. There each group of records runs through ``RecordProcessor`` in restore mode
-- exactly the code the runtime and the catch-up use -- against an in-memory database, and
the group's final state comes back as the bytes the runtime would have stored.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import orjson

from framework.app import App
from framework.processing import RecordProcessor, StoredMessage
from rebalance import TopicHistory
from statestore import DatabaseIdentity, ProcessorDatabase

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["AppFold"]

_COMMIT_EVERY = 10_000


def _headers(text: str | None) -> list[tuple[str, bytes | None]] | None:
    """Headers from the JSON text Spark carries them as (binary values base64-encoded)."""
    if not text:
        return None
    return [
        (str(h["key"]), None if h.get("value") is None else base64.b64decode(h["value"]))
        for h in orjson.loads(text)
    ]


class AppFold:
    """Folds records with ``app``'s processor functions (restore mode) into state items.

    ``initial_partitions``: each input topic's ``N`` (the topic registry's), and
    ``histories``: their partition histories, to skip the records the runtime would
    dead-letter as misplaced or late; ``initial_processors``: the app's ``B``, which orders
    stored keys (the items are yielded as stored, prefix and all, for the SST files).
    """

    def __init__(
        self,
        app: App,
        initial_partitions: Mapping[str, int] | None = None,
        histories: Mapping[str, TopicHistory] | None = None,
        initial_processors: int = 1,
    ) -> None:
        app.check()
        self.app = app
        self.initial_partitions = dict(initial_partitions or {})
        self.histories = dict(histories or {})
        self.initial_processors = initial_processors
        self._processor: RecordProcessor | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {
            "app": self.app,
            "initial_partitions": self.initial_partitions,
            "histories": self.histories,
            "initial_processors": self.initial_processors,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.app = state["app"]
        self.initial_partitions = dict(state.get("initial_partitions", {}))
        self.histories = dict(state.get("histories", {}))
        self.initial_processors = int(state.get("initial_processors", 1))
        self._processor = None

    def __call__(self, records: pd.DataFrame) -> Iterator[tuple[str, bytes, bytes]]:
        """``(store, key, encoded value)`` of each key's state after ``records`` (in order)."""
        if self._processor is None:
            self._processor = RecordProcessor(
                self.app, self.initial_partitions, histories=self.histories
            )
        processor = self._processor
        database = ProcessorDatabase.in_memory(
            DatabaseIdentity(
                self.app.config.app_id, -1, {"initial_processors": self.initial_processors}
            ),
            self.app.store_specs(),
        )
        batch = database.begin()
        columns = (
            records["topic"],
            records["partition"],
            records["offset"],
            records["key"],
            records["value"],
            records["timestamp"],
            records["headers"],
        )
        for count, (topic, partition, offset, key, value, timestamp, headers) in enumerate(
            zip(*columns, strict=True), start=1
        ):
            message = StoredMessage(
                topic,
                int(partition),
                int(offset),
                None if key is None else bytes(key),
                None if value is None else bytes(value),
                None if timestamp is None or math.isnan(timestamp) else int(timestamp),
                _headers(headers),
            )
            processor.process(batch, message, restore=True)
            if count % _COMMIT_EVERY == 0:
                batch.commit()
                batch = database.begin()
        batch.commit()
        for store in database.store_names():
            for key, raw in database.backend.scan(store):
                yield store, key, raw
