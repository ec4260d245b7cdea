"""The app's own processor function as a Spark bootstrap ``Fold``.

Spark ships ``AppFold`` (and with it the ``App``: its stores, processor functions and config)
to its workers. There each group of records runs through ``RecordProcessor`` in restore mode
-- exactly the code the runtime and the catch-up use -- against an in-memory database, and
the group's final state comes back as the bytes the runtime would have stored. Records arrive
as an Arrow table and are decoded a column (of up to ``_COMMIT_EVERY`` rows) at a time.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pyarrow as pa

from framework.app import App
from framework.gc_tuning import fewer_collections
from framework.processing import RecordProcessor
from rebalance import TopicHistory
from statestore import DatabaseIdentity, ProcessorDatabase

__all__ = ["RECORD_COLUMNS", "AppFold", "header_lists"]

_COMMIT_EVERY = 10_000

#: the columns of the records a fold takes, in this order
RECORD_COLUMNS = ("topic", "partition", "offset", "key", "value", "timestamp", "headers")


class _Message(tuple[Any, ...]):
    """One record read by Spark, ``(topic, partition, offset, key, value, timestamp,
    headers)``, presented as confluent-kafka's ``Message`` presents one."""

    __slots__ = ()

    def topic(self) -> str:
        """The record's topic."""
        return self[0]  # type: ignore[no-any-return]

    def partition(self) -> int:
        """The record's partition."""
        return self[1]  # type: ignore[no-any-return]

    def offset(self) -> int:
        """The record's offset."""
        return self[2]  # type: ignore[no-any-return]

    def key(self) -> bytes | None:
        """The record's key."""
        return self[3]  # type: ignore[no-any-return]

    def value(self) -> bytes | None:
        """The record's value."""
        return self[4]  # type: ignore[no-any-return]

    def timestamp(self) -> tuple[int, int]:
        """``(type, epoch ms)`` as confluent-kafka gives it (type 0: none)."""
        stamp = self[5]
        return (0, 0) if stamp is None else (1, stamp)

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        """The record's headers (``None`` when it has none, as confluent-kafka says)."""
        return self[6]  # type: ignore[no-any-return]


def header_lists(column: pa.Array | pa.ChunkedArray) -> list[list[tuple[str, bytes | None]] | None]:
    """Each row's headers as ``[(name, value), ...]``, ``None`` for none (null or empty),
    from a ``list<struct<key: string, value: binary>>`` column, decoded a field at a time."""
    lists = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not isinstance(lists, pa.ListArray):
        raise TypeError(f"headers must be a list<struct<key, value>> column, not {lists.type}")
    offsets = lists.offsets.to_pylist()  # into the whole child array, even of a slice
    first = offsets[0] if offsets else 0
    fields = lists.values.slice(first, (offsets[-1] - first) if offsets else 0)
    pairs = list(
        zip(fields.field("key").to_pylist(), fields.field("value").to_pylist(), strict=True)
    )
    found = [
        pairs[start - first : end - first] or None for start, end in itertools.pairwise(offsets)
    ]
    if lists.null_count:  # a null list's offsets need not be equal: say None explicitly
        for index, valid in enumerate(lists.is_valid().to_pylist()):
            if not valid:
                found[index] = None
    return found


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
        process = self._processor.process
        database = ProcessorDatabase.in_memory(
            DatabaseIdentity(
                self.app.config.app_id, -1, {"initial_processors": self.initial_processors}
            ),
            self.app.store_specs(),
        )
        with fewer_collections():
            for start in range(0, records.num_rows, _COMMIT_EVERY):
                chunk = records.slice(start, _COMMIT_EVERY)
                columns = [chunk.column(name).to_pylist() for name in RECORD_COLUMNS[:-1]]
                columns.append(header_lists(chunk.column("headers")))
                batch = database.begin()
                if running is None:
                    for row in zip(*columns, strict=True):
                        process(batch, _Message(row), restore=True, where=row[:3])
                else:
                    for index, row in enumerate(zip(*columns, strict=True), start):
                        running(index)
                        process(batch, _Message(row), restore=True, where=row[:3])
                        running(-1)
                batch.commit()
        for store in database.store_names():
            for key, raw in database.backend.scan(store):
                yield store, key, raw
