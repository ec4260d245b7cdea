"""Where a bulk build of a canonically ordered app stops: what the live loop would have applied.

A live processor that has read each of its partitions up to some offsets has not applied
everything it read: its merge buffer (``framework.order.MergeBuffer``) holds each record that
a record not read yet may still precede, and its state's offsets stop before the first one
held. A build whose history ends at arbitrary offsets (``--until now``: the log ends) must stop
there too: a record it applied past that point could be preceded, in its key's canonical
order, by a record written later, which the processor continuing from the built state would
then apply after it. So the build applies, per target processor, exactly what the buffer of a
processor owning the target's partitions releases once it has read the whole history:

- each partition's reach ``R`` is its mark after its last record (``NO_FLOOR``: none);
- input ``i``'s records are *safe* up to a mark ``bound(i)``: for every partition ``Q`` of
  another input ``j``, ``R(Q) >= m`` if ``j > i``, ``R(Q) > m`` if ``j < i`` (``bounds``; no
  record is safe while another input has no partition: the live loop waits for it);
- the buffer releases the least head by ``(mark, input)`` while it is safe: so it stops at
  the least ``(mark, input)`` of a record that is not (``stop``), and releases exactly the
  records before it in that order; as marks never decrease along a partition, that is a
  prefix of each partition, up to the first offset whose mark reaches ``held_from``.

The built state then covers each partition up to there, with its mark there (the mark of the
last record applied), as a batch of the live loop commits them (``applied_positions``,
``applied_marks``). Partitions a shrink deleted bound nothing (nothing is written to them any
more); their records are held like any.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from framework.bootstrap.errors import BootstrapError
from framework.bootstrap.order_marks import MARK_COLUMN, marks_at_ends
from framework.order import ENDED, NO_FLOOR
from rebalance.positions import Position

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = [
    "Applied",
    "BuildCut",
    "applied_in_build",
    "applied_prefix",
    "bounds",
    "cut_build",
    "held_from",
    "stop",
]


@dataclass(frozen=True)
class Applied:
    """Where the build stops in a partition: the next ``offset`` (records before it are
    applied) and the ``mark`` there (``NO_FLOOR``: nothing applied)."""

    offset: int
    mark: int


def bounds(reaches: Mapping[Position, int], inputs: Sequence[str]) -> list[int | None]:
    """Per input (``inputs``: config order), the largest mark of its records that is safe when
    each partition of ``reaches`` was read to the end with that reach ``R`` (``None``: none is,
    another input has no partition)."""
    found: list[int | None] = []
    for index in range(len(inputs)):
        bound: int | None = ENDED  # (no other input: every record is safe)
        for other, topic in enumerate(inputs):
            if other == index:
                continue
            lows = [reach for (name, _), reach in reaches.items() if name == topic]
            if not lows:
                bound = None
                break
            low = min(lows)
            limit = low if other > index else low - 1
            bound = min(ENDED if bound is None else bound, limit)
        found.append(bound)
    return found


def stop(firsts: Mapping[Position, int | None], inputs: Sequence[str]) -> tuple[int, int] | None:
    """The least ``(mark, input)`` of a record that is not safe, from each partition's least
    mark above its input's bound (``firsts``; ``None``: every record of it is safe); ``None``:
    every record is."""
    index = {topic: i for i, topic in enumerate(inputs)}
    found = [(mark, index[topic]) for (topic, _), mark in firsts.items() if mark is not None]
    return min(found) if found else None


def held_from(stopped: tuple[int, int] | None, input: int) -> int | None:
    """The least mark of a record of ``input`` that is held once the buffer stopped at
    ``stopped`` (``stop``): records at ``(mark, input)`` from there on (``None``: none is)."""
    if stopped is None:
        return None
    mark, at = stopped
    return mark if input >= at else mark + 1


def applied_prefix(
    marks: Mapping[Position, Sequence[int]], inputs: Sequence[str], bounding: Iterable[Position]
) -> dict[Position, Applied]:
    """Where a processor reading ``marks`` (each partition's records' marks, in offset order)
    stops: ``bounding``, the partitions that bound the others (those that exist now)."""
    index = {topic: i for i, topic in enumerate(inputs)}
    bounding = set(bounding)
    reaches = {p: (m[-1] if m else NO_FLOOR) for p, m in marks.items() if p in bounding}
    limits = bounds(reaches, inputs)
    if any(limit is None for limit in limits):
        return {p: Applied(0, NO_FLOOR) for p in marks}  # another input has no partition
    firsts = {}
    for position, found in marks.items():
        limit = limits[index[position[0]]]
        firsts[position] = next((m for m in found if limit is not None and m > limit), None)
    stopped = stop(firsts, inputs)
    applied = {}
    for position, found in marks.items():
        held = held_from(stopped, index[position[0]])
        at = next((o for o, m in enumerate(found) if held is not None and m >= held), len(found))
        applied[position] = Applied(at, found[at - 1] if at else NO_FLOOR)
    return applied


def applied_in_build(
    marked: DataFrame,
    reaches: Mapping[Position, int],
    ends: Mapping[Position, int],
    inputs: Sequence[str],
    bounding: Iterable[Position],
) -> dict[Position, Applied]:
    """``applied_prefix`` of one processor's partitions (``ends``: each one's end in the
    history), computed in Spark on the history ``marked`` (``order_marks.with_marks``;
    ``reaches``: ``order_marks.marks_at_ends``)."""
    from pyspark.sql import functions as F  # noqa: PLC0415, N812

    index = {topic: i for i, topic in enumerate(inputs)}
    bounding = set(bounding)
    limits = bounds(
        {p: reaches.get(p, NO_FLOOR) for p in ends if p in bounding},
        inputs,
    )
    if any(limit is None for limit in limits):
        return {p: Applied(0, NO_FLOOR) for p in ends}
    mine = marked.where(_per_partition({p: F.lit(True) for p in ends}, F.lit(False)))
    limit_of = {p: limits[index[p[0]]] for p in ends}
    above = F.col(MARK_COLUMN) > _per_partition(
        {p: F.lit(limit) for p, limit in limit_of.items()}, F.lit(None)
    )
    rows = (
        mine.groupBy("topic", "partition")
        .agg(F.min(F.when(above, F.col(MARK_COLUMN))).alias("first"))
        .collect()
    )
    firsts = {(str(r["topic"]), int(r["partition"])): r["first"] for r in rows}
    stopped = stop({p: None if m is None else int(m) for p, m in firsts.items()}, inputs)
    held = {p: held_from(stopped, index[p[0]]) for p in ends}
    if all(h is None for h in held.values()):
        return {p: Applied(end, reaches.get(p, NO_FLOOR)) for p, end in ends.items()}
    held_mark = _per_partition({p: F.lit(h) for p, h in held.items() if h is not None}, None)
    is_held = held_mark.isNotNull() & (F.col(MARK_COLUMN) >= held_mark)
    rows = (
        mine.groupBy("topic", "partition")
        .agg(
            F.min(F.when(is_held, F.col("offset"))).alias("held"),
            F.max(F.when(~is_held, F.col(MARK_COLUMN))).alias("mark"),
        )
        .collect()
    )
    found = {(str(r["topic"]), int(r["partition"])): r for r in rows}
    applied = {}
    for position, end in ends.items():
        row = found.get(position)
        if row is None:
            applied[position] = Applied(end, NO_FLOOR)
            continue
        offset = end if row["held"] is None else int(row["held"])
        mark = NO_FLOOR if row["mark"] is None else int(row["mark"])
        applied[position] = Applied(offset, mark)
    return applied


def _per_partition(values: Mapping[Position, Column], otherwise: Column | None) -> Column:
    """A column that is ``values[(topic, partition)]`` of each row (else ``otherwise``)."""
    from pyspark.sql import functions as F  # noqa: PLC0415, N812

    column: Column | None = None
    for (topic, partition), value in values.items():
        test = (F.col("topic") == topic) & (F.col("partition") == partition)
        column = F.when(test, value) if column is None else column.when(test, value)
    if column is None:
        return otherwise if otherwise is not None else F.lit(None)
    return column if otherwise is None else column.otherwise(otherwise)


@dataclass(frozen=True)
class BuildCut:
    """Where each target of a build stops (``covered``: its partitions' offsets) with the
    marks there (``marks``; none for a growth child stopped at its life's start whose base is
    not known), the history up to there (``history``: what it applies) and, per target, the
    base of each growth child it covers (``bases``: ``(its life's start, its base)``, kept
    with the built state as the live loop keeps one it found)."""

    covered: dict[int, dict[Position, int]]
    marks: dict[int, dict[Position, int]]
    history: DataFrame
    bases: dict[int, dict[Position, tuple[int, int]]] = field(default_factory=dict)


def cut_build(
    marked: DataFrame,
    covered: Mapping[int, Mapping[Position, int]],
    inputs: Sequence[str],
    partitions: Mapping[str, int],
    *,
    bases: Mapping[Position, tuple[int, int]] | None = None,
    starts: Mapping[Position, int] | None = None,
) -> BuildCut:
    """Cut a build's history ``marked`` (``order_marks.with_marks``; read several times:
    persist it) where each target's live loop would have stopped (``applied_in_build``):
    ``covered``: the offsets each target's history reaches; ``partitions``: each input's
    partition count now (a partition past it bounds nothing); ``bases``: each growth child's
    ``(last life's start, base)`` the marks took (``order_marks.child_bases``); ``starts``:
    each growth child's last life's start (``order_marks.child_starts``). A child stopped at
    its life's start has its base as its mark there, or no mark when its base is not known
    (the live loop then waits for it: ``framework.runtime.growth_bases``)."""
    from pyspark.sql import functions as F  # noqa: PLC0415, N812

    counted = Counter(p for ends in covered.values() for p in ends)
    shared = sorted(p for p, count in counted.items() if count > 1)
    if shared:
        raise BootstrapError(
            f"partitions {shared} are built for several processors at once; an app with "
            "input_order canonical builds each partition for one processor only. Nothing was "
            "ingested."
        )
    reaches = marks_at_ends(marked)
    limits: dict[Position, int] = {}
    cut_covered: dict[int, dict[Position, int]] = {}
    marks: dict[int, dict[Position, int]] = {}
    kept: dict[int, dict[Position, tuple[int, int]]] = {}
    bases, starts = bases or {}, starts or {}
    for target, ends in sorted(covered.items()):
        bounding = [p for p in ends if p[1] < partitions.get(p[0], 0)]
        applied = applied_in_build(marked, reaches, ends, inputs, bounding)
        cut_covered[target] = {p: a.offset for p, a in applied.items()}
        marks[target] = {}
        for position, at in applied.items():
            if starts.get(position) != at.offset:
                marks[target][position] = at.mark
                continue
            based = bases.get(position)  # (at its life's start: its base, if known)
            if based is not None and based[0] == at.offset:
                marks[target][position] = based[1]
        kept[target] = {p: bases[p] for p in ends if p in bases}
        limits.update(cut_covered[target])
    below = F.col("offset") < _per_partition({p: F.lit(o) for p, o in limits.items()}, F.lit(-1))
    return BuildCut(cut_covered, marks, marked.where(below), kept)
