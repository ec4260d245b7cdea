"""What a bootstrap runs in Spark's Python workers, on Arrow data.

- ``group_folder``: the fold of one group of records (``applyInArrow``): keep the records whose
  key a target processor builds (the runtime's murmur3 ``key_hash`` and ``bucket``), order
  them by processor, lineage rank (per record: the step of the topic's history in force at
  its offset) and offset (an app that orders its inputs canonically: by processor, then its
  canonical order, mark first), and fold each processor's records with the
  ``Fold`` into ``(processor, store, key, value)`` items (under a ``CrashWatch``: a record
  that kills the worker is skipped as the processors' crash guards skip it);
- ``file_writer``: the writer (``mapInArrow``) that streams a task's sorted items into SST
  files, one run of files per ``(processor, store)``.

Columns are decoded once per batch (``to_pylist``, numpy), never a row at a time through
pandas.
"""

from __future__ import annotations

import functools
import gc
import itertools
import os
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from framework.bootstrap.careful_child import Watch
from framework.bootstrap.crash_watch import CrashWatch
from framework.bootstrap.errors import BootstrapError
from framework.bootstrap.order_marks import MARK_COLUMN
from framework.order import ORDER_FIELDS
from framework.time.due_items import DueItem
from rebalance import bucket_array, key_hashes
from rebalance.positions import Position

if TYPE_CHECKING:
    import numpy.typing as npt

    from framework.bootstrap.history import RankSteps
    from framework.bootstrap.job import Fold

__all__ = ["FILES_SCHEMA", "ITEMS_SCHEMA", "Placement", "file_writer", "group_folder"]

#: what a group's fold returns: each key's final state, by target processor
ITEMS_SCHEMA = pa.schema(
    [
        ("processor", pa.int32()),
        ("store", pa.string()),
        ("key", pa.binary()),
        ("value", pa.binary()),
    ]
)

#: what a writer task returns: one row per SST file
FILES_SCHEMA = pa.schema(
    [
        ("processor", pa.int32()),
        ("store", pa.string()),
        ("path", pa.string()),
        ("keys", pa.int64()),
    ]
)


@dataclass(frozen=True)
class Placement:
    """Which records a fold keeps and in which order, from a bootstrap's plan.

    ``topics``: the input topics, whose index the job sends in the ``topic`` column;
    ``lineage``: each input partition's ranks by offset (``history.lineage_ranks``: plain
    tuples, shipped to the workers as they are); ``gained_from`` = (old processor count,
    sources) keeps only keys one of the sources owned at the old count. ``inputs``: the input
    topics in config order for an app that orders them canonically (``input_times.ordered``):
    the records then have a ``mark`` column (``order_marks.with_marks``) and each key's are
    sorted by ``ORDER_FIELDS`` (mark, input, rank, offset), as the live loop applies them;
    ``None``: by lineage alone, ``(rank, offset)``.
    """

    initial_processors: int
    processors: int
    targets: tuple[int, ...]
    topics: tuple[str, ...]
    lineage: Mapping[Position, RankSteps]
    gained_from: tuple[int, tuple[int, ...]] | None = None
    inputs: tuple[str, ...] | None = None

    def order(self, records: pa.Table) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The rows of ``records`` to fold, in processing order, and each one's processor."""
        keys = records.column("key")
        present = np.flatnonzero(keys.is_valid().to_numpy(zero_copy_only=False))
        hashes = np.asarray(key_hashes(keys.take(present).to_pylist()), dtype=np.int64)
        b = self.initial_processors
        owners = bucket_array(hashes, b, self.processors)
        wanted = np.isin(owners, self.targets)
        if self.gained_from is not None:
            previous, sources = self.gained_from
            wanted &= np.isin(bucket_array(hashes, b, previous), sources)
        rows, owners = present[wanted], owners[wanted]
        topic = _numbers(records.column("topic"))[rows]
        partition = _numbers(records.column("partition"))[rows]
        offset = _numbers(records.column("offset"))[rows]
        ranks = self.ranks(topic, partition, offset)
        if self.inputs is None:
            order = np.lexsort((offset, ranks, owners))
        else:  # each key's records in their canonical order (framework.order)
            inputs = np.asarray([self.inputs.index(name) for name in self.topics], np.int64)
            fields = {
                "mark": _numbers(records.column(MARK_COLUMN))[rows],
                "input": inputs[topic],
                "rank": ranks,
                "offset": offset,
            }
            order = np.lexsort((*(fields[name] for name in reversed(ORDER_FIELDS)), owners))
        return rows[order], owners[order]

    def ranks(
        self,
        topic: npt.NDArray[np.int64],
        partition: npt.NDArray[np.int64],
        offset: npt.NDArray[np.int64],
    ) -> npt.NDArray[np.int64]:
        """The lineage rank of each record ``(topic index, partition, offset)``, looked up
        per partition (``np.searchsorted`` in its rank steps); ``BootstrapError`` for a
        record of a partition the lineage does not have."""
        tables, stride = self._rank_tables
        known = (topic >= 0) & (topic < len(self.topics)) & (partition >= 0) & (partition < stride)
        codes = np.where(known, topic * stride + partition, -1)
        ranks = np.full(len(codes), -1, dtype=np.int64)
        order = np.argsort(codes, kind="stable")
        ordered = codes[order]
        cuts = (np.flatnonzero(np.diff(ordered)) + 1).tolist()  # where the partition changes
        for start, end in zip([0, *cuts], [*cuts, len(order)], strict=True):
            table = tables.get(int(ordered[start])) if end > start else None
            if table is None:
                continue
            rows = order[start:end]
            offsets, steps = table
            ranks[rows] = steps[np.searchsorted(offsets, offset[rows], side="right") - 1]
        unknown = np.flatnonzero(ranks < 0)
        if unknown.size:
            first = int(unknown[0])
            name = self.topics[topic[first]] if 0 <= topic[first] < len(self.topics) else "?"
            raise BootstrapError(
                f"a record of {name}[{int(partition[first])}] is not in the plan's partition "
                f"lineage ({len(unknown)} such records): the history holds partitions the "
                "build does not order. Nothing was ingested."
            )
        return ranks

    @functools.cached_property
    def _rank_tables(
        self,
    ) -> tuple[dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]], int]:
        """``topic index * stride + partition`` -> (boundary offsets, rank from each), and
        the stride (one more than the highest partition)."""
        stride = 1 + max((p for _, p in self.lineage), default=0)
        index = {name: i for i, name in enumerate(self.topics)}
        tables = {
            index[name] * stride + p: (
                np.asarray(offsets, dtype=np.int64),
                np.asarray(steps, dtype=np.int64),
            )
            for (name, p), (offsets, steps) in self.lineage.items()
            if name in index
        }
        return tables, stride


_frozen = False  # whether this process froze its heap (once per Spark Python worker)


def _freeze_worker_heap() -> None:
    """In a Spark Python worker, once: move what the worker holds by now (its modules, the
    app) out of the cycle collector's sight. pyspark's daemon runs a full collection after
    every task of a reused worker, and each one scanned all of it. Reference counting still
    frees those objects; only cycles among them are never collected."""
    global _frozen  # noqa: PLW0603 - one heap per process
    if _frozen:
        return
    from pyspark import TaskContext  # noqa: PLC0415

    if TaskContext.get() is not None:
        gc.freeze()
        _frozen = True


def _numbers(column: pa.ChunkedArray) -> npt.NDArray[np.int64]:
    return np.asarray(column.to_numpy(), dtype=np.int64)


def group_folder(
    placement: Placement,
    fold: Fold,
    counters: Sequence[Any],
    watch: CrashWatch | None = None,
) -> Callable[[pa.Table], pa.Table]:
    """The ``applyInArrow`` function: one group's records (``topic`` as an index into
    ``placement.topics``, and the ``group`` label) to the items of the keys the targets
    build; counts records read, applied and dead-lettered (not applied) in ``counters``,
    three accumulators (the rest of those read have no key, a key no target builds, or
    killed the worker). ``watch``: the crash guard that skips records which kill
    the worker (``crash_watch``)."""
    topics = pa.array(placement.topics, pa.string())

    def fold_group(records: pa.Table) -> pa.Table:
        _freeze_worker_heap()
        read, applied, dead = counters
        read.add(records.num_rows)
        rows, owners = placement.order(records)

        def fold_rows(skip: frozenset[int], running: Watch | None) -> pa.Table:
            if not skip:
                return _fold_runs(records, rows, owners, topics, fold=fold, running=running)
            kept = ~np.isin(rows, np.fromiter(skip, dtype=np.int64))
            return _fold_runs(records, rows[kept], owners[kept], topics, fold=fold, running=running)

        dead_before = fold.dead_letters
        if watch is None or not records.num_rows:
            table, skipped = fold_rows(frozenset(), None), 0
        else:
            label = int(records.column("group")[0].as_py())
            table, skipped = watch.fold(label, fold_rows, _GroupRows(placement, records))
        dead_letters = fold.dead_letters - dead_before
        dead.add(dead_letters)
        applied.add(len(rows) - skipped - dead_letters)
        return table

    return fold_group


class _GroupRows:
    """A group's records by row, for its ``CrashWatch`` (``topic`` as an index)."""

    def __init__(self, placement: Placement, records: pa.Table) -> None:
        self._topics = placement.topics
        self._records = records

    def where(self, row: int) -> tuple[str, int, int, bytes | None]:
        """The row's topic, partition, offset and key."""
        record = self._records.slice(row, 1).to_pylist()[0]
        return (
            self._topics[record["topic"]],
            record["partition"],
            record["offset"],
            record["key"],
        )

    def find(self, positions: Collection[tuple[str, int, int]]) -> dict[tuple[str, int, int], int]:
        """The rows of the records at ``positions`` it holds."""
        if not positions:
            return {}
        topic = _numbers(self._records.column("topic"))
        partition = _numbers(self._records.column("partition"))
        offset = _numbers(self._records.column("offset"))
        index = {name: i for i, name in enumerate(self._topics)}
        found = {}
        for position in positions:
            name, p, o = position
            hits = np.flatnonzero((topic == index.get(name, -2)) & (partition == p) & (offset == o))
            if hits.size:
                found[position] = int(hits[0])
        return found


def _fold_runs(
    records: pa.Table,
    rows: npt.NDArray[np.int64],
    owners: npt.NDArray[np.int64],
    topics: pa.Array,
    *,
    fold: Fold,
    running: Watch | None,
) -> pa.Table:
    """Fold ``rows`` of ``records`` (in order), each owner's run by itself, into items;
    ``running`` is told each row (of ``records``) the function runs on, -1 after (and each
    tick's item it fires)."""
    processors: list[int] = []
    stores: list[str] = []
    keys: list[bytes] = []
    values: list[bytes] = []
    runs = np.flatnonzero(np.diff(owners)) + 1
    for start, end in zip([0, *runs.tolist()], [*runs.tolist(), len(rows)], strict=True):
        if start == end:
            continue
        taken = records.take(rows[start:end])
        topic = topics.take(taken.column("topic").combine_chunks())
        ordered = taken.set_column(taken.schema.get_field_index("topic"), "topic", topic)
        processor = int(owners[start])
        if running is None:
            items = fold(ordered)
        else:
            items = fold(ordered, _GroupWatch(running, rows[start:end].tolist()))
        for store, key, value in items:
            processors.append(processor)
            stores.append(store)
            keys.append(key)
            values.append(value)
    return pa.table([processors, stores, keys, values], schema=ITEMS_SCHEMA)


class _GroupWatch:
    """``running`` told a row of the group, from a row of one run (``rows``), -1 as -1 (its
    ticks' items as they are)."""

    def __init__(self, running: Watch, rows: list[int]) -> None:
        self._running = running
        self._rows = rows

    def __call__(self, row: int) -> None:
        self._running(self._rows[row] if row >= 0 else -1)

    def tick(self, where: tuple[str, int, int], key: bytes, item: DueItem) -> None:
        self._running.tick(where, key, item)

    def refused(self, where: tuple[str, int, int], key: bytes) -> Mapping[DueItem, int]:
        return self._running.refused(where, key)


def file_writer(
    directory: Path, max_items: int
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function: a task's items, sorted by ``(processor, store, key)``, to
    SST files of at most ``max_items`` keys under ``directory/processor-J/STORE/``."""

    def write(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext  # noqa: PLC0415

        from statestore.rocks import write_sst_file  # noqa: PLC0415

        context = TaskContext.get()
        part = context.partitionId() if context is not None else os.getpid()
        rows = (
            row
            for batch in batches
            for row in zip(
                *(batch.column(name).to_pylist() for name in ITEMS_SCHEMA.names), strict=True
            )
        )
        written: list[tuple[int, str, str, int]] = []
        for (processor, store), run in itertools.groupby(rows, key=lambda r: (r[0], r[1])):
            pairs = ((key, value) for _, _, key, value in run)
            for chunk_index in itertools.count():
                chunk = list(itertools.islice(pairs, max_items))
                if not chunk:
                    break
                folder = directory / f"processor-{processor}" / store
                folder.mkdir(parents=True, exist_ok=True)
                path = folder / f"part-{part:05d}-{chunk_index:03d}.sst"
                keys = write_sst_file(path, chunk)
                written.append((processor, store, str(path), keys))
        columns = [
            pa.array([row[index] for row in written], field.type)
            for index, field in enumerate(FILES_SCHEMA)
        ]
        yield pa.RecordBatch.from_arrays(columns, schema=FILES_SCHEMA)

    return write
