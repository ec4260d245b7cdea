"""Where a receiver's catch-up applies each source's gained keys from (a transfer records it).

A transfer by snapshot records, per source, the offsets its snapshot covers in the progress
scope ``<scope>-from-<source>`` (0s when the source's keys are replayed instead); the catch-up
applies a record of a key gained from source ``s`` only at or past ``s``'s offset.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from rebalance.positions import Position
from statestore import ProcessorDatabase

__all__ = ["replayed_from_0", "source_scope", "source_starts"]

log = logging.getLogger(__name__)


def source_scope(scope: str, source: int) -> str:
    """The progress scope holding where source ``source``'s snapshot left off."""
    return f"{scope}-from-{source}"


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
