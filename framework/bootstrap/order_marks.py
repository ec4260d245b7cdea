"""The marks of a bulk build's history, for an app that orders its inputs canonically.

An app with several inputs and ``time.input_order: canonical`` (``input_times.ordered``)
applies each key's records in their canonical order (``framework.order``): by ``(mark, input,
rank, offset)``, where a record's *mark* is the running max of the event times (a tick's
floor) read in its partition up to it, in offset order. A mark depends on every record of the
partition before it, of every key, so it is computed on the whole history before records are
grouped by key: each record's event time in Python (``InputTimes``, the rule every reader
uses: ``event_times``), then a running max over each partition in offset order (a window
function: ``with_marks``, column ``mark``; ``NO_FLOOR`` before any time, as a partition read
from its first offset starts). The fold sorts by it (``tasks.Placement``), and the mark at
each built offset (``marks_at_ends``) is stored with the built state in the progress scope
``ORDER_SCOPE``, where the live loop keeps it, so a processor started from the built state goes
on in the same order.

Every partition's marks start at ``NO_FLOOR`` at offset 0 (a build reads every partition from
its first record), except a growth child's from its last life's start: they start from its
*base*, its parent's mark at the child's marker as the registry records it (``child_bases``:
the largest event time of the parent's life up to the marker, and the parent's own base),
the value the live loop records (``framework.runtime.growth_bases``; except where a live
reader of the parent started without its mark: see there). The build keeps each child's base
with the built state (``order_cut.BuildCut.bases``), where the live loop keeps one it found,
and stores it as the child's mark when it stops at the child's life's start. A child whose
marker is not recorded keeps ``NO_FLOOR`` and gets no mark stored at its life's start, where
the live loop waits for its base (its records wait at their gate, which the build's cut keeps
out). The parent's history must reach back to its life's start (a backfill's does); a
shrink's survivor does not take its deleted partitions' final marks from its hold on, which the live
loop does (so an app whose inputs shrank is refused: ``build.check_orderable``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

import pyarrow as pa

from framework.app import App
from framework.bootstrap.arrow_rows import ArrowMessage, row_chunks
from framework.coordination.registry import TopicEntry
from framework.input_times import InputTimes
from framework.order import NO_FLOOR
from rebalance import Grow, parent
from rebalance.positions import Position

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "MARK_COLUMN",
    "child_bases",
    "child_starts",
    "event_times",
    "marks_and_bases",
    "marks_at_ends",
    "with_marks",
]

#: the column of each record's mark in the history ``with_marks`` gives
MARK_COLUMN = "mark"
#: the column of each record's event time (``None``: it has none), computed on the way
_TIME_COLUMN = "event_time"
#: the column of a record's life in its partition (1: a growth child's last, 0: before it)
_LIFE_COLUMN = "life"


def event_times(app: App) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function that adds each record's event time (``InputTimes.of``;
    null when it has none) to batches of the history's columns."""

    def add_times(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        times = InputTimes(app)
        for batch in batches:
            table = pa.Table.from_batches([batch])
            found: list[int | None] = []
            for _start, rows in row_chunks(table):
                for row in rows:
                    found.append(times.of(row[0], row[1], row[2], ArrowMessage(row)))
            timed = table.append_column(_TIME_COLUMN, pa.array(found, pa.int64()))
            yield from timed.to_batches()

    return add_times


def with_marks(
    history: DataFrame, app: App, entries: Mapping[str, TopicEntry] | None = None
) -> DataFrame:
    """``history`` (the build's columns: ``sources``) with each record's ``mark``: the running
    max of its partition's event times up to it, in offset order (``NO_FLOOR`` before any),
    from a growth child's last life's start on at least its base (``child_bases`` of the
    registry's ``entries``)."""
    return marks_and_bases(history, app, entries)[0]


def marks_and_bases(
    history: DataFrame, app: App, entries: Mapping[str, TopicEntry] | None = None
) -> tuple[DataFrame, dict[Position, tuple[int, int]]]:
    """``with_marks`` of ``history`` and the ``child_bases`` it used."""
    from pyspark.sql import Window  # noqa: PLC0415
    from pyspark.sql import functions as F  # noqa: PLC0415, N812
    from pyspark.sql.types import LongType, StructField, StructType  # noqa: PLC0415

    schema = StructType([*history.schema.fields, StructField(_TIME_COLUMN, LongType(), True)])
    timed = history.mapInArrow(event_times(app), schema)
    bases = child_bases(timed, entries or {})
    life, base = F.lit(0), F.lit(NO_FLOOR)
    for (topic, partition), (start, found) in bases.items():
        child = (F.col("topic") == topic) & (F.col("partition") == partition)
        in_life = child & (F.col("offset") >= start)
        life = F.when(in_life, F.lit(1)).otherwise(life)
        base = F.when(in_life, F.lit(found)).otherwise(base)
    running = (
        Window.partitionBy("topic", "partition", _LIFE_COLUMN)
        .orderBy("offset")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    lived = timed.withColumn(_LIFE_COLUMN, life)
    own = F.coalesce(F.max(_TIME_COLUMN).over(running), F.lit(NO_FLOOR))
    mark = F.greatest(own, base)
    marked = lived.withColumn(MARK_COLUMN, mark.cast("long"))
    return marked.drop(_TIME_COLUMN, _LIFE_COLUMN), bases


def child_starts(entries: Mapping[str, TopicEntry]) -> dict[Position, int]:
    """Per growth child of the registry's ``entries``, its last life's start."""
    return {
        (topic, child): start
        for topic, entry in sorted(entries.items())
        for child, (start, _marker) in _lives(entry).items()
    }


def _lives(entry: TopicEntry) -> dict[int, tuple[int, int | None]]:
    """Per growth child of ``entry``'s topic, its last life's start and its marker there as
    the registry records it (``None``: not recorded)."""
    lives: dict[int, tuple[int, int | None]] = {}
    for step in entry.history.steps:
        if isinstance(step, Grow):
            lives.update({c: (start, step.markers.get(c)) for c, start in step.starts.items()})
    return lives


def child_bases(
    timed: DataFrame, entries: Mapping[str, TopicEntry]
) -> dict[Position, tuple[int, int]]:
    """Per growth child whose marker the registry records (``entries``), ``(its last life's
    start, its base)``: the larger of its parent's base (a child's too) and the largest event
    time in ``timed`` (column ``event_time``) of the parent's life up to the marker."""
    from pyspark.sql import functions as F  # noqa: PLC0415, N812

    bases: dict[Position, tuple[int, int]] = {}
    for topic, entry in sorted(entries.items()):
        history = entry.history
        for child, (start, marker) in sorted(_lives(entry).items()):
            source = parent(child, history.initial_partitions)
            if marker is None or source is None:
                continue
            source_start, source_base = bases.get((topic, source), (0, NO_FLOOR))
            read = timed.filter(
                (F.col("topic") == topic)
                & (F.col("partition") == source)
                & F.col("offset").between(source_start, marker)
            )
            [row] = read.agg(F.max(_TIME_COLUMN).alias("own")).collect()
            own = NO_FLOOR if row["own"] is None else int(row["own"])
            bases[(topic, child)] = (start, max(source_base, own))
    return bases


def marks_at_ends(marked: DataFrame) -> dict[Position, int]:
    """Each partition's mark after its last record in ``marked`` (``with_marks``): the mark at
    the offset a build covers it up to (a partition with no record there: absent, its mark is
    ``NO_FLOOR``)."""
    from pyspark.sql import functions as F  # noqa: PLC0415, N812

    rows = marked.groupBy("topic", "partition").agg(F.max(MARK_COLUMN).alias("mark")).collect()
    return {(str(row["topic"]), int(row["partition"])): int(row["mark"]) for row in rows}
