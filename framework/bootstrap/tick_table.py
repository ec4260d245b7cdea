"""The ticks of a bulk build's history (``framework.time.ticks``), gathered on the driver.

Ticks are keyless records, few next to the keyed ones, and each applies to every key living
in its partition at its offset: so they do not go through the job's grouping by key. The
driver reads them from the history (``collect_ticks``: only keyless records with the tick
header leave the JVM), keeps those the app applies (its own, and those that name no app:
``TickRead.applies_to``; another app's are passed over, as every reader does), and the fold
gets all of them (Spark ships the fold, and the table in
it, to its workers, broadcast when large). Per input partition the table holds the ticks'
offsets, floors, processing times and history steps named (``ticks.TickRead``; -1: none)
in offset order, and answers the fold's one question
fast: which is the first tick in a range that makes something of a key due
(``PartitionTicks.first_due``, by block maxima: ``O(log ticks)``, twice the ticks' size in
memory), so ticks that change nothing for a key cost it nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from framework.time.ticks import TICK_HEADER, TickRead, read_tick
from rebalance.positions import Position

if TYPE_CHECKING:
    import numpy.typing as npt
    from pyspark.sql import DataFrame

__all__ = ["NO_STEPS", "PartitionTicks", "TickTable", "collect_ticks"]

Header = tuple[str, bytes | None]
#: a tick that names no history steps (``TickRead.steps`` is ``None``)
NO_STEPS = -1


@dataclass
class PartitionTicks:
    """One input partition's ticks, by offset: their floors, processing times and the
    history steps each names (``NO_STEPS``: none; default: none names any)."""

    offsets: npt.NDArray[np.int64]
    floors: npt.NDArray[np.int64]
    walls: npt.NDArray[np.int64]
    steps: npt.NDArray[np.int64] | None = None
    #: block maxima of floors and walls, by level (``first_due``), built when first used
    _maxima: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] | None = field(
        default=None, repr=False, compare=False
    )

    def __getstate__(self) -> dict[str, Any]:
        return {
            "offsets": self.offsets,
            "floors": self.floors,
            "walls": self.walls,
            "steps": self.steps,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.offsets, self.floors, self.walls = state["offsets"], state["floors"], state["walls"]
        self.steps = state["steps"]
        self._maxima = None

    def __len__(self) -> int:
        return len(self.offsets)

    def index(self, offset: int) -> int:
        """The index of the first tick at or after ``offset``."""
        return int(np.searchsorted(self.offsets, offset, side="left"))

    def first_due(self, low: int, high: int, event: int, wall: int) -> int:
        """The first index in ``[low, high)`` whose tick makes a key due at ``event`` (event
        time) or ``wall`` (processing time) due: floor ``>= event`` or wall ``>= wall``, as
        ``StateBatch.due_keys`` asks; ``high`` when none does. ``O(log ticks)``: whole
        blocks of ticks that make nothing due are passed over by their maxima."""
        maxima = self._maxima if self._maxima is not None else self._build()
        at = low
        while at < high:
            # the largest block starting at ``at`` (aligned to its size) within ``high``
            level = min((at & -at).bit_length() - 1 if at else 64, (high - at).bit_length() - 1)
            level = min(level, len(maxima) - 1)
            floors, walls = maxima[level]
            block = at >> level
            if floors[block] < event and walls[block] < wall:
                at += 1 << level  # nothing due by any tick of the block
                continue
            while level:  # the block has one: find the first, half by half
                level -= 1
                floors, walls = maxima[level]
                block = at >> level
                if floors[block] < event and walls[block] < wall:
                    at += 1 << level
            return at
        return high

    def _build(self) -> list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]:
        """Level ``k``: the maxima of the aligned blocks ``[i * 2**k, (i + 1) * 2**k)``."""
        maxima = [(self.floors, self.walls)]
        while len(maxima[-1][0]) > 1:
            maxima.append((_pairs(maxima[-1][0]), _pairs(maxima[-1][1])))
        self._maxima = maxima
        return maxima


def _pairs(values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The max of each pair of ``values`` (the last alone when they are odd)."""
    if len(values) % 2:
        values = np.append(values, np.iinfo(np.int64).min)
    return np.maximum(values[0::2], values[1::2])


@dataclass
class TickTable:
    """Every tick of a history an app applies, per input partition; ``malformed``: keyless
    records with the tick header that are no tick (the runtime dead-letters them; they change
    nothing)."""

    partitions: dict[Position, PartitionTicks] = field(default_factory=dict)
    malformed: int = 0

    @classmethod
    def of(
        cls, rows: Iterable[tuple[str, int, int, Sequence[Header] | None]], *, app: str
    ) -> TickTable:
        """The table of the ticks app ``app`` applies among ``rows``: ``(topic, partition,
        offset, headers)`` of keyless records (those that are no tick are counted in
        ``malformed``; another app's ticks are left out); a tick read twice (an archive that
        holds it twice) counts once."""
        found: dict[Position, dict[int, TickRead]] = {}
        malformed = 0
        for topic, partition, offset, headers in rows:
            read = read_tick(list(headers or []))
            if isinstance(read, str):
                malformed += 1
                continue
            if read.applies_to(app):
                found.setdefault((topic, partition), {})[offset] = read
        partitions = {}
        for position, ticks in sorted(found.items()):
            offsets = sorted(ticks)
            partitions[position] = PartitionTicks(
                np.asarray(offsets, dtype=np.int64),
                np.asarray([ticks[o].floor for o in offsets], dtype=np.int64),
                np.asarray([ticks[o].wall for o in offsets], dtype=np.int64),
                np.asarray([_steps(ticks[o].steps) for o in offsets], dtype=np.int64),
            )
        return cls(partitions, malformed)

    def __len__(self) -> int:
        return sum(len(ticks) for ticks in self.partitions.values())

    def tick(self, position: Position, index: int) -> tuple[int, int, int, int | None]:
        """``(offset, floor, wall, steps)`` of the ``index``-th tick of ``position``."""
        ticks = self.partitions[position]
        steps = NO_STEPS if ticks.steps is None else int(ticks.steps[index])
        return (
            int(ticks.offsets[index]),
            int(ticks.floors[index]),
            int(ticks.walls[index]),
            None if steps == NO_STEPS else steps,
        )


def _steps(steps: int | None) -> int:
    return NO_STEPS if steps is None else steps


def collect_ticks(history: DataFrame, app: str) -> TickTable:
    """The ticks app ``app`` applies of ``history`` (the job's columns: ``topic``,
    ``partition``, ``offset``, ``key``, ``headers``), read to the driver: records with a tick
    header and no key, or a compacted topic's tick key (``is_tick_record``), only."""
    from pyspark.sql import functions as F  # noqa: PLC0415, N812

    # (a binary cast to string keeps the bytes: the prefix is compared byte for byte)
    tick_keyed = (
        F.col("key").cast("string").startswith(F.concat(F.col("topic"), F.lit(f"/{TICK_HEADER}/")))
    )
    ticks = history.where(
        (F.col("key").isNull() | tick_keyed)
        & F.exists("headers", lambda header: header["key"] == TICK_HEADER)
    ).select("topic", "partition", "offset", "headers")
    rows = (
        (
            str(row["topic"]),
            int(row["partition"]),
            int(row["offset"]),
            [
                (str(h["key"]), None if h["value"] is None else bytes(h["value"]))
                for h in row["headers"] or []
            ],
        )
        for row in ticks.toLocalIterator()
    )
    return TickTable.of(rows, app=app)
