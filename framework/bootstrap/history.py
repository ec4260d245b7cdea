"""The input history a bulk build reads: offset ranges, retention checks, lineage order.

A bulk build must see a key's *whole* history, so every range starts at the partition's
first record ever written (offset 0). When Kafka no longer holds it (retention deleted it),
or an archive does not reach far enough, the build is refused with the partitions named and
what is retained -- state is never built from partial history.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from framework.config import AppConfig
from framework.coordination.registry import TopicEntry
from framework.errors import SplitstateError
from rebalance.positions import OffsetRange, Position

__all__ = [
    "HistoryError",
    "archive_ranges",
    "check_kafka_ranges",
    "lineage_ranks",
    "parse_until",
]

_LINEAGE_STEPS = 1024


class HistoryError(SplitstateError):
    """The history asked for is not (or no longer) available."""


def parse_until(text: str, positions: Iterable[Position]) -> dict[Position, int]:
    """Parse ``--until`` offsets, ``TOPIC:PARTITION=OFFSET,...``, naming every partition."""
    wanted = set(positions)
    until: dict[Position, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        where, _, offset = item.partition("=")
        topic, _, partition = where.rpartition(":")
        try:
            position, value = (topic, int(partition)), int(offset)
        except ValueError:
            raise HistoryError(
                f"--until: {item!r} is not TOPIC:PARTITION=OFFSET. Fix: e.g. "
                "--until words:0=1200,words:1=980 (one entry per input partition), or "
                "--until now."
            ) from None
        if position not in wanted:
            raise HistoryError(
                f"--until names {topic}[{partition}], which is not an input partition of the "
                f"app (inputs: {_names(wanted)})."
            )
        if value < 0:
            raise HistoryError(f"--until: offset {value} for {topic}[{partition}] is negative")
        until[position] = value
    missing = wanted - set(until)
    if missing:
        raise HistoryError(
            f"--until leaves out {_names(missing)}. Fix: give an offset for every input "
            "partition, or use --until now."
        )
    return until


def check_kafka_ranges(
    ranges: Mapping[Position, OffsetRange], retained: Mapping[Position, OffsetRange], source: str
) -> None:
    """Raise ``HistoryError`` unless Kafka holds every offset of ``ranges``."""
    problems = []
    for position, wanted in sorted(ranges.items()):
        have = retained[position]
        if wanted.end > have.end:
            problems.append(
                f"{_name(position)}: asked up to offset {wanted.end}, but the partition ends at "
                f"{have.end}"
            )
        elif wanted.start < have.start and wanted.end > wanted.start:
            problems.append(
                f"{_name(position)}: needs offsets from {wanted.start}, but Kafka retains only "
                f"{have.start}..{have.end} (retention deleted the rest)"
            )
    if problems:
        raise HistoryError(
            f"cannot build state from {source}: {'; '.join(problems)}. Building from partial "
            "history would give wrong state. Fix: bootstrap from a Parquet archive that holds "
            "the whole history (--source parquet PATH, or spark.archive for joining "
            "processors), or ask only for offsets that exist (--until)."
        )


def archive_ranges(
    wanted: Mapping[Position, OffsetRange],
    archived: Mapping[Position, OffsetRange],
    *,
    exact: bool,
) -> dict[Position, OffsetRange]:
    """The ranges a Parquet archive can serve of ``wanted`` (clipped to where it ends).

    Raises ``HistoryError`` when the archive misses a partition's beginning, holds partitions
    the app does not read, or (``exact``) ends before a wanted end.
    """
    problems = []
    extra = set(archived) - set(wanted)
    if extra:
        problems.append(f"it holds {_names(extra)}, which are not input partitions here")
    served: dict[Position, OffsetRange] = {}
    for position, asked in sorted(wanted.items()):
        have = archived.get(position)
        if have is None:
            served[position] = OffsetRange(asked.start, asked.start)
            if exact and asked.end > asked.start:
                problems.append(f"{_name(position)} is not in the archive")
            continue
        if have.start > asked.start:
            problems.append(
                f"{_name(position)} starts at offset {have.start} in the archive; the records "
                f"from {asked.start} are missing"
            )
        if exact and have.end < asked.end:
            problems.append(
                f"{_name(position)} ends at offset {have.end} in the archive, not {asked.end}"
            )
        served[position] = OffsetRange(asked.start, min(asked.end, have.end))
    if problems:
        raise HistoryError(
            f"the Parquet archive cannot serve this build: {'; '.join(problems)}. Fix: archive "
            "each input partition from its first record (and up to --until), or use "
            "--source kafka."
        )
    return served


def lineage_ranks(config: AppConfig, entries: Mapping[str, TopicEntry]) -> dict[Position, int]:
    """Each input partition's place in processing order for a key's records.

    Topics in config order, then partitions by the growth that created them, so a key's
    records in an ancestor partition come before those in the partitions split from it.
    """
    ranks: dict[Position, int] = {}
    for index, topic in enumerate(config.inputs):
        history = entries[topic.topic].history
        for partition in range(history.partitions):
            ranks[(topic.topic, partition)] = index * _LINEAGE_STEPS + history.created_at(partition)
    return ranks


def _name(position: Position) -> str:
    return f"{position[0]}[{position[1]}]"


def _names(positions: Iterable[Position]) -> str:
    return ", ".join(_name(p) for p in sorted(positions))
