"""The app's own processor function as a Spark bootstrap ``Fold``.

Spark ships ``AppFold`` (and with it the ``App``: its stores, processor functions and config)
to its workers. There each group of records runs through ``RecordProcessor`` in restore mode
-- exactly the code the runtime and the catch-up use -- against an in-memory database, and
the group's final state comes back as the bytes the runtime would have stored. Records arrive
as an Arrow table and are decoded a column at a time (``arrow_rows``). An app that keeps time
is folded key by key with the history's ticks (``time_fold``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa

from framework.app import App
from framework.bootstrap.arrow_rows import RECORD_COLUMNS, ArrowMessage, header_lists, row_chunks
from framework.bootstrap.careful_child import Watch
from framework.bootstrap.key_ticks import KeySpans
from framework.bootstrap.tick_table import TickTable
from framework.bootstrap.time_fold import fold_by_key
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
    ``ticks``: the history's ticks (``tick_table.collect_ticks``), which an app that keeps
    time applies to each key where it lives (every input topic then needs its history).
    """

    def __init__(
        self,
        app: App,
        initial_partitions: Mapping[str, int] | None = None,
        histories: Mapping[str, TopicHistory] | None = None,
        initial_processors: int = 1,
        ticks: TickTable | None = None,
    ) -> None:
        app.check()
        self.app = app
        self.initial_partitions = dict(initial_partitions or {})
        self.histories = dict(histories or {})
        self.initial_processors = initial_processors
        self.ticks = ticks or TickTable()
        missing = [t.topic for t in app.config.inputs if t.topic not in self.histories]
        if self.ticks.partitions and missing:
            raise ValueError(
                f"ticks are given but not the partition histories of input topics {missing}: "
                "without them the fold cannot know which keys a tick applies to"
            )
        self._processor: RecordProcessor | None = None
        self._spans: KeySpans | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {
            "app": self.app,
            "initial_partitions": self.initial_partitions,
            "histories": self.histories,
            "initial_processors": self.initial_processors,
            "ticks": self.ticks,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.app = state["app"]
        self.initial_partitions = dict(state.get("initial_partitions", {}))
        self.histories = dict(state.get("histories", {}))
        self.initial_processors = int(state.get("initial_processors", 1))
        self.ticks = state.get("ticks") or TickTable()
        self._processor = None
        self._spans = None

    @property
    def dead_letters(self) -> int:
        """Records dead-lettered so far (in this process), not applied."""
        return 0 if self._processor is None else self._processor.dead_letter_count

    def __call__(
        self, records: pa.Table, running: Watch | None = None
    ) -> Iterator[tuple[str, bytes, bytes]]:
        """``(store, key, encoded value)`` of each key's state after ``records`` (in order;
        the columns of ``RECORD_COLUMNS``: topic string, partition int, offset long, key and
        value binary, timestamp long epoch ms, headers ``list<struct<key: string, value:
        binary>>``). ``running`` is told the index of each record before the function runs
        on it, and -1 after. An app that keeps time also gets each key's ticks, between its
        records (``running`` told each tick's item it fires, and those it refuses dropped);
        a keyless record there is processed alone (ticks come in ``ticks``)."""
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
        if self.app.uses_time:
            if self._spans is None:
                topics = [t.topic for t in self.app.config.inputs]
                histories = {t: self.histories[t] for t in topics if t in self.histories}
                self._spans = KeySpans(histories, self.ticks)
            stores = [spec.name for spec in self.app.store_specs()]
            with fewer_collections():
                yield from fold_by_key(
                    records, self._processor, database, stores, self._spans, self.ticks, running
                )
            return
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
