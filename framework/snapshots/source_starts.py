"""Where a receiver's catch-up applies each source's gained keys from (a transfer records it).

A transfer by snapshot records, per source, the offsets its snapshot covers in the progress
scope ``<scope>-from-<source>`` (0s when the source's keys are replayed instead); the catch-up
applies a record of a key gained from source ``s`` only at or past ``s``'s offset. Of an app
in the canonical input order, the transfer records with them the source's marks there (its
snapshot's ``order-mark`` at its state's offsets: ``snapshot_marks``) in
``<scope>-from-<source>-mark``, and the catch-up's marks at its progress in
``mark_scope(scope)``.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping

from framework.input_times import ORDER_SCOPE
from framework.stored_marks import stored_marks
from rebalance.positions import Position
from statestore import ProcessorDatabase
from statestore.backend import Backend
from statestore.layout import META_STORE, OFFSET_PREFIX, parse_offset_key
from statestore.meta import prefix_end

__all__ = [
    "catch_up_starts",
    "mark_scope",
    "replayed_from_0",
    "snapshot_marks",
    "source_mark_scope",
    "source_scope",
    "source_starts",
    "start_marks",
]

log = logging.getLogger(__name__)


def source_scope(scope: str, source: int) -> str:
    """The progress scope holding where source ``source``'s snapshot left off."""
    return f"{scope}-from-{source}"


def mark_scope(scope: str) -> str:
    """The progress scope of a catch-up's marks at its progress (``scope``: its progress
    scope)."""
    return f"{scope}-mark"


def source_mark_scope(scope: str, source: int) -> str:
    """The progress scope holding source ``source``'s marks where its snapshot left off."""
    return mark_scope(source_scope(scope, source))


def snapshot_marks(
    backend: Backend, starts: Mapping[Position, int], snapshot: str = "a snapshot"
) -> dict[Position, int]:
    """The marks of the snapshot in ``backend`` (its ``order-mark``) at ``starts``: of each
    partition whose start is the snapshot's state offset there (its mark is kept at it);
    ``BadStoredMarkError`` naming ``snapshot`` (its id) when one is not a mark."""
    offsets = {
        parse_offset_key(key): int(value)
        for key, value in backend.scan(META_STORE, OFFSET_PREFIX, prefix_end(OFFSET_PREFIX))
    }
    marks = stored_marks(
        backend,
        ORDER_SCOPE,
        f"snapshot {snapshot}",
        "abort the scale (`splitstate scale MODULE:APP --abort`), take a new snapshot of "
        "the source processor (`splitstate snapshot take MODULE:APP --processor J`) and "
        "scale again, or scale with `bootstrap: replay`.",
    )
    return {
        position: marks[position]
        for position, start in starts.items()
        if position in marks and offsets.get(position) == start
    }


def catch_up_starts(
    database: ProcessorDatabase,
    scope: str,
    reads: Mapping[int, tuple[Collection[Position], Mapping[Position, int | None]]],
) -> tuple[dict[Position, int], dict[Position, int]]:
    """Where the catch-up reads each partition from once every source of ``reads`` (per
    source: its handoff's partitions, and its S2 with bounds) is in, and the marks there a
    source's snapshot gave (``start_marks``): the lowest start of the sources that still
    need records of it (one of their handoff's partitions, or an ancestor their snapshot
    covers only below its threshold); a partition none needs starts past every source's
    threshold of it, so it is not read at all."""
    starts = source_starts(database, scope, frozenset(reads))
    needing: dict[Position, list[int]] = {}
    for source, (partitions, bounds) in reads.items():
        for position, bound in bounds.items():
            start = starts[position][source]
            if position in partitions or bound is None or start < bound:
                needing.setdefault(position, []).append(start)
    firsts = {
        position: min(needing[position]) if position in needing else max(by_source.values())
        for position, by_source in starts.items()
    }
    return firsts, start_marks(database, scope, starts, firsts)


def start_marks(
    database: ProcessorDatabase,
    scope: str,
    starts: Mapping[Position, Mapping[int, int]],
    firsts: Mapping[Position, int],
) -> dict[Position, int]:
    """The marks at ``firsts`` (where the catch-up reads each partition from) that a source's
    snapshot gave (``starts``: per partition, per source, where its snapshot left off)."""
    marks: dict[Position, int] = {}
    for source in {s for by_source in starts.values() for s in by_source}:
        given = database.progress(source_mark_scope(scope, source))
        for position, first in firsts.items():
            if starts[position].get(source) == first and position in given:
                marks.setdefault(position, given[position])
    return marks


def source_starts(
    database: ProcessorDatabase, scope: str, sources: frozenset[int]
) -> dict[Position, dict[int, int]]:
    """Per partition, per source: the offset from which the catch-up applies that source's
    gained keys (what its snapshot covers; nothing recorded: 0)."""
    starts: dict[Position, dict[int, int]] = {}
    for source in sources:
        for position, offset in database.progress(source_scope(scope, source)).items():
            starts.setdefault(position, {})[source] = offset
    return starts


def replayed_from_0(
    database: ProcessorDatabase,
    scope: str,
    source: int,
    positions: Mapping[Position, object],
    *,
    why: tuple[int, float, bool],
) -> None:
    """Record that source ``source``'s gained keys are replayed from offset 0 on ``positions``
    (no snapshot of it is used; a restart does not switch back to one under a half-replayed
    state), saying why: ``why`` is (the receiver, seconds it waited, whether the source had
    released the partitions)."""
    processor, waited, released = why
    log.warning(
        "processor %d: processor %d %s after %.0fs of waiting; the keys it gains from it "
        "are rebuilt by replaying %s from offset 0 instead",
        processor,
        source,
        "released them before any snapshot of the scale covered them (none can now)"
        if released
        else "has no snapshot (is snapshots.url writable by it?)",
        waited,
        sorted(positions),
    )
    batch = database.begin()
    for topic, partition in positions:
        batch.set_progress(source_scope(scope, source), topic, partition, 0)
    batch.commit()
