"""Where a bootstrap reads history: a Kafka topic's offset ranges, or a Parquet archive of it.

Both give the same columns: ``topic`` (string), ``partition`` (int), ``offset`` (long),
``key`` and ``value`` (binary), ``timestamp`` (long, epoch milliseconds) and ``headers``
(array of ``{key: string, value: binary}``). Ranges are half-open: ``[start, end)``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from framework.bootstrap.errors import BootstrapError
from framework.time.ticks import TICK_HEADER
from rebalance.positions import OffsetRange, Position

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "ARCHIVE_COLUMNS",
    "ArchiveError",
    "check_archive_columns",
    "check_archive_ticks",
    "kafka_history",
    "parquet_history",
    "parquet_offsets",
]


#: Parquet archive columns and the Spark types each may have.
ARCHIVE_COLUMNS: dict[str, tuple[str, ...]] = {
    "key": ("binary", "string"),
    "value": ("binary", "string"),
    "partition": ("int", "bigint", "smallint"),
    "offset": ("bigint", "int"),
    "timestamp": ("timestamp", "timestamp_ntz", "bigint"),
    "headers": ("array<struct<key:string,value:binary>>",),
}
_OPTIONAL = {"headers"}
_HEADERS = "array<struct<key:string,value:binary>>"


class ArchiveError(BootstrapError):
    """A Parquet archive does not have the columns a topic archive needs."""


def kafka_history(
    spark: SparkSession,
    kafka_options: Mapping[str, str],
    ranges: Mapping[Position, OffsetRange],
) -> DataFrame:
    """The records of ``ranges`` read with Spark's Kafka source (batch, exact offsets)."""
    from pyspark.sql import functions as F  # noqa: PLC0415, N812

    topics: dict[str, list[int]] = {}
    starting: dict[str, dict[str, int]] = {}
    ending: dict[str, dict[str, int]] = {}
    for (topic, partition), offsets in sorted(ranges.items()):
        if offsets.end <= offsets.start:
            continue
        topics.setdefault(topic, []).append(partition)
        starting.setdefault(topic, {})[str(partition)] = offsets.start
        ending.setdefault(topic, {})[str(partition)] = offsets.end
    if not topics:
        return _empty(spark)
    reader = spark.read.format("kafka")
    for key, value in kafka_options.items():
        reader = reader.option(key, value)
    frame = (
        reader.option("assign", json.dumps(topics))
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
        .option("includeHeaders", "true")
        .option("failOnDataLoss", "true")
        # split large partitions into several tasks: every core reads
        .option("minPartitions", str(2 * spark.sparkContext.defaultParallelism))
        .load()
    )
    return frame.select(
        F.col("topic"),
        F.col("partition").cast("int").alias("partition"),
        F.col("offset").cast("long").alias("offset"),
        F.col("key"),
        F.col("value"),
        F.expr("unix_millis(timestamp)").alias("timestamp"),
        F.col("headers").cast(_HEADERS).alias("headers"),
    )


def parquet_history(
    spark: SparkSession,
    path: Path,
    topics: list[str],
    ranges: Mapping[Position, OffsetRange] | None = None,
) -> DataFrame:
    """The records of a Parquet archive at ``path`` (optionally only within ``ranges``).

    An archive of one topic may leave out the ``topic`` column; an archive of several must
    have it. Duplicate records (the same topic, partition and offset) are kept once.
    """
    from pyspark.sql import functions as F  # noqa: PLC0415, N812

    frame = spark.read.parquet(str(path))
    types = dict(frame.dtypes)
    check_archive_columns(types, path, topics)
    columns = [
        (F.col("topic").cast("string") if "topic" in types else F.lit(topics[0])).alias("topic"),
        F.col("partition").cast("int").alias("partition"),
        F.col("offset").cast("long").alias("offset"),
        F.col("key").cast("binary").alias("key"),
        F.col("value").cast("binary").alias("value"),
        (
            F.col("timestamp").cast("long")
            if types["timestamp"] == "bigint"
            else F.expr("unix_millis(cast(timestamp as timestamp))")
        ).alias("timestamp"),
        (F.col("headers") if "headers" in types else F.lit(None).cast(_HEADERS)).alias("headers"),
    ]
    frame = frame.select(*columns).where(F.col("topic").isin(topics))
    if ranges is not None:
        frame = frame.where(_within(ranges))
    return frame.dropDuplicates(["topic", "partition", "offset"])


def check_archive_columns(types: Mapping[str, str], path: Path, topics: list[str]) -> None:
    """Raise ``ArchiveError`` naming each missing or mistyped column of an archive."""
    problems: list[str] = []
    for column, allowed in ARCHIVE_COLUMNS.items():
        found = types.get(column)
        if found is None:
            if column not in _OPTIONAL:
                problems.append(f"column {column!r} is missing")
        elif found not in allowed:
            problems.append(f"column {column!r} is {found}, expected {' or '.join(allowed)}")
    if "topic" not in types and len(topics) > 1:
        problems.append(f"column 'topic' is missing (needed: the app reads {len(topics)} topics)")
    elif "topic" in types and types["topic"] != "string":
        problems.append(f"column 'topic' is {types['topic']}, expected string")
    if problems:
        raise ArchiveError(
            f"the Parquet archive {path} cannot be read as a topic archive: "
            f"{'; '.join(problems)}. Fix: write the archive with columns key (binary), value "
            "(binary), partition (int), offset (bigint), timestamp (timestamp or epoch ms "
            "bigint), headers (array<struct<key:string,value:binary>>, optional) and topic "
            "(string, when it holds several topics)."
        )


def check_archive_ticks(spark: SparkSession, path: Path) -> None:
    """For an app that keeps time or orders its inputs canonically (whose forced ticks are
    ticks): raise ``ArchiveError`` when the archive at ``path`` holds
    keyless records but no ``headers`` column. Ticks are keyless records known by their
    header (``framework.time.ticks``); without headers the build could not apply them, and
    would leave windows open and timers unfired that the processors closed and fired."""
    from pyspark.sql import functions as F  # noqa: PLC0415, N812

    frame = spark.read.parquet(str(path))
    if "headers" in dict(frame.dtypes):
        return
    # a compacted input's ticks have a key of their own, ``<topic>/splitstate.tick/<id>``
    # (``framework.time.ticks.tick_key``); the archive may have no topic column to match
    tick_keyed = F.col("key").cast("string").contains(f"/{TICK_HEADER}/")
    keyless = frame.where(F.col("key").isNull() | tick_keyed).limit(1).count()
    if keyless:
        raise ArchiveError(
            f"the Parquet archive {path} has records without a key (or with a compacted "
            "input's tick key) but no 'headers' column. "
            "The app keeps time or orders its inputs canonically, and its ticks (recorded "
            "progress of time, or the order's forced decisions) are keyless records known by "
            "their splitstate.tick header: without headers the build cannot apply them, and "
            "would not build what the processors did. Fix: write the archive with the headers "
            "column (array<struct<key:string,value:binary>>), or use --source kafka."
        )


def parquet_offsets(frame: DataFrame) -> dict[Position, OffsetRange]:
    """Per partition, the first offset in the archive and one past the last."""
    from pyspark.sql import functions as F  # noqa: PLC0415, N812

    rows = (
        frame.groupBy("topic", "partition")
        .agg(F.min("offset").alias("first"), F.max("offset").alias("last"))
        .collect()
    )
    return {
        (str(row["topic"]), int(row["partition"])): OffsetRange(
            int(row["first"]), int(row["last"]) + 1
        )
        for row in rows
    }


def _within(ranges: Mapping[Position, OffsetRange]) -> Any:
    from pyspark.sql import functions as F  # noqa: PLC0415, N812

    condition = F.lit(False)
    for (topic, partition), offsets in ranges.items():
        condition = condition | (
            (F.col("topic") == topic)
            & (F.col("partition") == partition)
            & (F.col("offset") >= offsets.start)
            & (F.col("offset") < offsets.end)
        )
    return condition


def _empty(spark: SparkSession) -> DataFrame:
    schema = (
        "topic string, partition int, offset long, key binary, value binary, timestamp long, "
        f"headers {_HEADERS}"
    )
    return spark.createDataFrame([], schema)
