"""The app's own processor function as a Spark bootstrap ``Fold``.

Spark ships ``AppFold`` (and with it the ``App``: its stores, processor functions and config)
to its workers. There each group of records runs through ``RecordProcessor`` in restore mode
-- exactly the code the runtime and the catch-up use -- against an in-memory database, and
the group's final state comes back as the bytes the runtime would have stored. Records arrive
as an Arrow table and are decoded a column at a time (``arrow_rows``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pyarrow as pa

from framework.app import App
from framework.bootstrap.arrow_rows import RECORD_COLUMNS, ArrowMessage, header_lists, row_chunks
from framework.gc_tuning import fewer_collections
from framework.processing import RecordProcessor
from rebalance import TopicHistory
from statestore import DatabaseIdentity, ProcessorDatabase

__all__ = ["RECORD_COLUMNS", "AppFold", "header_lists"]


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

    @property
    def dead_letters(self) -> int:
        """Records dead-lettered so far (in this process), not applied."""
        return 0 if self._processor is None else self._processor.dead_letter_count

    def __call__(
        self, records: pa.Table, running: Callable[[int], None] | None = None
    ) -> Iterator[tuple[str, bytes, bytes]]:
        """``(store, key, encoded value)`` of each key's state after ``records`` (in order;
        the columns of ``RECORD_COLUMNS``: topic string, partition int, offset long, key and
        value binary, timestamp long epoch ms, headers ``list<struct<key: string, value:
        binary>>``). ``running`` is told the index of each record before the function runs
        on it, and -1 after."""
        if self._processor is None:
            self._processor = RecordProcessor(
                self.app, self.initial_partitions, histories=self.histories
            )
        database = ProcessorDatabase.in_memory(
            DatabaseIdentity(
                self.app.config.app_id, -1, {"initial_processors": self.initial_processors}
            ),
            self.app.store_specs(),
        )
        process = self._processor.process
        with fewer_collections():
            for start, rows in row_chunks(records):
                batch = database.begin()
                if running is None:
                    for row in rows:
                        process(batch, ArrowMessage(row), restore=True, where=row[:3])
                else:
                    for index, row in enumerate(rows, start):
                        running(index)
                        process(batch, ArrowMessage(row), restore=True, where=row[:3])
                        running(-1)
                batch.commit()
        for store in database.store_names():
            for key, raw in database.backend.scan(store):
                yield store, key, raw
