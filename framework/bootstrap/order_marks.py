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
its first record); a growth child does not start from its parent's mark at the marker, as
the live loop does not yet either, nor a shrink's survivor take its deleted partitions' final
marks from its hold on, which the live loop does (so an app whose inputs shrank is refused:
``build.check_orderable``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from framework.app import App
from framework.bootstrap.arrow_rows import ArrowMessage, row_chunks
from framework.input_times import InputTimes
from framework.order import NO_FLOOR
from rebalance.positions import Position

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["MARK_COLUMN", "event_times", "marks_at_ends", "with_marks"]

#: the column of each record's mark in the history ``with_marks`` gives
MARK_COLUMN = "mark"
#: the column of each record's event time (``None``: it has none), computed on the way
_TIME_COLUMN = "event_time"


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


def with_marks(history: DataFrame, app: App) -> DataFrame:
    """``history`` (the build's columns: ``sources``) with each record's ``mark``: the running
    max of its partition's event times up to it, in offset order (``NO_FLOOR`` before any)."""
    from pyspark.sql import Window  # noqa: PLC0415
    from pyspark.sql import functions as F  # noqa: PLC0415, N812
    from pyspark.sql.types import LongType, StructField, StructType  # noqa: PLC0415

    schema = StructType([*history.schema.fields, StructField(_TIME_COLUMN, LongType(), True)])
    timed = history.mapInArrow(event_times(app), schema)
    running = (
        Window.partitionBy("topic", "partition")
        .orderBy("offset")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    mark = F.coalesce(F.max(_TIME_COLUMN).over(running), F.lit(NO_FLOOR))
    return timed.withColumn(MARK_COLUMN, mark.cast("long")).drop(_TIME_COLUMN)


def marks_at_ends(marked: DataFrame) -> dict[Position, int]:
    """Each partition's mark after its last record in ``marked`` (``with_marks``): the mark at
    the offset a build covers it up to (a partition with no record there: absent, its mark is
    ``NO_FLOOR``)."""
    from pyspark.sql import functions as F  # noqa: PLC0415, N812

    rows = marked.groupBy("topic", "partition").agg(F.max(MARK_COLUMN).alias("mark")).collect()
    return {(str(row["topic"]), int(row["partition"])): int(row["mark"]) for row in rows}
