"""The input history a bulk build reads: offset ranges, retention checks, lineage order.

A bulk build must see a key's *whole* history, so it reads every partition an input ever had
(``history_positions``: deleted partitions too) and every range starts at the partition's
first record ever written (offset 0). When Kafka no longer holds it (retention deleted it),
or an archive does not reach far enough, the build is refused with the partitions named and
what is retained -- state is never built from partial history.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from framework.config import AppConfig
from framework.coordination.registry import TopicEntry
from framework.errors import SplitstateError
from rebalance import TopicHistory
from rebalance.positions import OffsetRange, Position

__all__ = [
    "HistoryError",
    "RankSteps",
    "archive_ranges",
    "check_kafka_ranges",
    "history_positions",
    "lineage_ranks",
    "parse_until",
    "ranks_of",
]

#: one input partition's lineage ranks by offset: ``(offsets, ranks)``, ``offsets`` ascending
#: from 0; a record at offset ``o`` has ``ranks[i]`` for the last ``i`` with ``offsets[i] <= o``
RankSteps = tuple[tuple[int, ...], tuple[int, ...]]


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


def history_positions(config: AppConfig, entries: Mapping[str, TopicEntry]) -> list[Position]:
    """Every partition each input topic ever had (``TopicHistory.created``), in config order:
    a deleted partition still holds its keys' earlier records, so a bulk build reads it."""
    return [
        (topic.topic, partition)
        for topic in config.inputs
        for partition in range(entries[topic.topic].history.created)
    ]


def lineage_ranks(
    config: AppConfig, entries: Mapping[str, TopicEntry]
) -> dict[Position, RankSteps]:
    """Each input partition's lineage ranks by offset (every partition ever created): a key's
    records are in the order produced when sorted by ``(rank, offset)``.

    Topics in config order (each topic's ranks above the one before's), then the step of the
    topic's history in force at the record's offset (``TopicHistory.rank``): a key's records
    in a parent before a growth's marker come before those in the child, a deleted
    partition's before its survivor's from the shrink's hold, and a partition deleted and
    grown again has a rank per life.
    """
    return ranks_of({topic.topic: entries[topic.topic].history for topic in config.inputs})


def ranks_of(histories: Mapping[str, TopicHistory]) -> dict[Position, RankSteps]:
    """``lineage_ranks`` of topics with ``histories`` (in config order)."""
    width = max((len(history.counts) for history in histories.values()), default=1)
    ranks: dict[Position, RankSteps] = {}
    for index, (name, history) in enumerate(histories.items()):
        for partition in range(history.created):
            offsets = tuple(sorted({0, *(b.offset for b in history.boundaries(partition))}))
            steps = tuple(index * width + history.rank(partition, o) for o in offsets)
            ranks[(name, partition)] = (offsets, steps)
    return ranks


def _name(position: Position) -> str:
    return f"{position[0]}[{position[1]}]"


def _names(positions: Iterable[Position]) -> str:
    return ", ".join(_name(p) for p in sorted(positions))
