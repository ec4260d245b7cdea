"""Rebuilding a processor's lost state safely: what may be rebuilt, and group commits that
never go below what the group already had."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from framework.coordination.registry import TopicEntry
from framework.processing import ProcessorStoppedError
from rebalance.positions import Position

__all__ = ["check_rebuildable", "committable"]


def check_rebuildable(
    processor: int,
    position: Position,
    owned: set[Position],
    start: int | None,
    *,
    inputs: Mapping[str, TopicEntry],
    state_dir: Path | None,
) -> None:
    """Refuse to rebuild a partition split off by a growth from its own records alone:
    its keys' earlier records are in an ancestor another processor reads (``inputs``: the
    input topics' registry entries; ``state_dir``: the processor's state directory). Called
    for a partition the group processed further than the state holds, and for every
    partition of a state directory that holds no offsets at all (new, or lost): the keys'
    state built from the ancestor (by a catch-up) is gone either way."""
    topic, partition = position
    entry = inputs.get(topic)
    if entry is None or start is not None:
        return  # state with an offset (even 0: a partition taken over empty) holds its keys
    elsewhere = [
        f"{read.topic}[{read.partition}] up to offset {read.end_offset}"
        for read in entry.history.key_history(partition)[:-1]
        if (read.topic, read.partition) not in owned and (read.end_offset or 0) > 0
    ]
    if elsewhere:
        raise ProcessorStoppedError(
            f"processor {processor} has no state for {topic}[{partition}] (a lost state "
            "directory: the group processed it, or the directory holds nothing at all), and "
            "that partition was split off by a growth: its keys' earlier records are in "
            f"{', '.join(elsewhere)}, "
            "which another processor reads. Rebuilding from the partition alone would "
            "leave those keys' state wrong, so it stops. Fix: restore the state directory "
            f"{state_dir} from a backup, or stop the app and rebuild every "
            "processor's state with `splitstate backfill MODULE:APP --replace`."
        )


def committable(
    restore_below: Mapping[Position, int], offsets: dict[Position, int]
) -> dict[Position, int]:
    """The offsets the group may take: never below what it already had (``restore_below``:
    the group's offset of each partition being rebuilt). A partition rebuilt after a lost
    state directory commits again only once its state passed the group's offset, so a crash
    or a release meanwhile still finds the group ahead (and rebuilds, or waits)."""
    bounds = restore_below
    return {p: o for p, o in offsets.items() if o >= bounds.get(p, 0)}
