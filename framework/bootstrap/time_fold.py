"""The fold of an app that keeps time: key by key, each key's records with its ticks.

``AppFold`` hands an app with time (``App.uses_time``) here. The records (one processor's,
in lineage order) are taken key by key, each key's in the order given; each key runs in a
state batch of its own through ``RecordProcessor.process`` in restore mode, and between its
records (and after its last) the ticks that apply to it go through the same call
(``key_ticks.KeyTicks``). The batch holds only that key, so a tick there reaches only it
(``StateBatch.due_keys`` finds only the key's own due times): what the ticks cost is the
ticks that make something of a key due. The key's items are its batch's writes, encoded as a
commit writes them; the batch is then dropped, so the fold holds one key at a time.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from framework.bootstrap.arrow_rows import ArrowMessage, row_chunks
from framework.bootstrap.careful_child import Watch
from framework.bootstrap.key_ticks import END, KeySpans, KeyTicks
from framework.bootstrap.tick_table import TickTable
from framework.processing import RecordProcessor, StoredMessage
from framework.time.ticks import tick_headers
from rebalance.positions import Position
from statestore import ProcessorDatabase, StateBatch
from statestore.due_index import DUE_STORE, NEVER, decode_due

__all__ = ["fold_by_key"]


def fold_by_key(  # noqa: PLR0917 - the fold's parts
    records: pa.Table,
    processor: RecordProcessor,
    database: ProcessorDatabase,
    stores: Sequence[str],
    spans: KeySpans,
    ticks: TickTable,
    running: Watch | None,
) -> Iterator[tuple[str, bytes, bytes]]:
    """``(store, stored key, value)`` of every key of ``records`` after its records and the
    ticks that apply to it (a keyless record is processed alone); ``running`` is told the
    row (of ``records``) the function runs on, -1 after, and each tick's item it fires (the
    items it refuses are dropped as failed, as a processor's crash guard drops them)."""
    codes = pc.dictionary_encode(records.column("key")).combine_chunks().indices
    order = np.argsort(codes.fill_null(-1).to_numpy(zero_copy_only=False), kind="stable")
    rows = order.tolist()
    run: _KeyRun | None = None
    for start, chunk in row_chunks(records.take(order)):
        for index, row in enumerate(chunk, start):
            key = row[3]
            if run is None or key is None or key != run.key:
                if run is not None:
                    yield from run.finish(stores)
                run = _KeyRun(key, database.begin(), processor, spans, ticks, watch=running)
            run.before(row)
            if running is None:
                run.record(row)
            else:
                running(rows[index])
                run.record(row)
                running(-1)
    if run is not None:
        yield from run.finish(stores)


class _KeyRun:
    """One key's batch, with its records and its ticks."""

    def __init__(
        self,
        key: bytes | None,
        batch: StateBatch,
        processor: RecordProcessor,
        spans: KeySpans,
        ticks: TickTable,
        *,
        watch: Watch | None = None,
    ) -> None:
        self.key = key
        self._batch = batch
        self._process = processor.process
        self._timing = processor.timing
        self._watch = watch
        self._spans = spans
        self._table = ticks
        self._ticks = (
            None
            if key is None or not ticks.partitions
            else KeyTicks(spans.spans(key), ticks, self._due, self._tick)
        )

    def before(self, row: tuple[Any, ...]) -> None:
        """Apply the key's ticks before the record ``row``."""
        if self._ticks is not None:
            topic, partition, offset = row[:3]
            rank = self._spans.rank(topic, partition, offset)
            if rank is not None:
                self._ticks.until(rank, offset)

    def record(self, row: tuple[Any, ...]) -> None:
        """Apply the record ``row``."""
        self._process(self._batch, ArrowMessage(row), restore=True, where=row[:3])

    def finish(self, stores: Sequence[str]) -> list[tuple[str, bytes, bytes]]:
        """Apply the ticks after the key's last record; its items (the batch is dropped)."""
        if self._ticks is not None:
            self._ticks.until(END, END)
        items = [
            (name, stored, raw)
            for name in stores
            for stored, raw in self._batch.store(name).encoded_changes()
            if raw is not None
        ]
        self._batch.abort()
        return items

    def _due(self) -> tuple[int, int]:
        """The key's earliest due times now."""
        assert self.key is not None
        raw = self._batch.store(DUE_STORE).get(self.key)
        return (NEVER, NEVER) if raw is None else decode_due(raw)

    def _tick(self, position: Position, index: int) -> None:
        """Apply the ``index``-th tick of ``position`` (to the key: the batch holds no other)."""
        topic, partition = position
        offset, floor, wall, steps = self._table.tick(position, index)
        # (the table holds only ticks the app applies: this one, naming no app, applies too)
        headers: list[tuple[str, bytes | None]] = list(tick_headers(floor, wall, steps=steps))
        tick = StoredMessage(topic, partition, offset, None, None, None, headers)
        where, watch, timing = (topic, partition, offset), self._watch, self._timing
        if watch is None or timing is None or self.key is None:
            self._process(self._batch, tick, restore=True, where=where)
            return
        key = self.key
        refused = {(key, item): _refused(where, n) for item, n in watch.refused(where, key).items()}
        with timing.guarding(lambda _key, item: watch.tick(where, key, item), refused):
            self._process(self._batch, tick, restore=True, where=where)
        watch(-1)


def _refused(where: tuple[str, int, int], crashes: int) -> str:
    """Why a tick's item is dropped (as ``framework.runtime.tick_guard`` says it)."""
    topic, partition, offset = where
    return (
        f"it killed the Spark fold's process {crashes} times at the tick {topic}[{partition}]"
        f"@{offset}; after crash_limit crashes it is dropped without running"
    )
