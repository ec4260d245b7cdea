"""How ``splitstate expand`` writes the topic registry while other runs of the same change may
write it too (a second terminal, a retried job): every reader keeps the first record of each
fact (``framework.coordination.entry_order``), so a run goes on from the entry the registry
kept, whoever wrote it.

Each step that measures and then writes (the count with its starts or holds, the fence ends,
the markers' offsets) measures first, then reads the registry again (``recorded_meanwhile``):
if another run took the step meanwhile, it adopts that record and writes nothing. Else it
writes its own and reads the registry back (``write_kept``): a record written from an older
copy is not kept (it stays in the log, skipped by every reader, compacted or not: each
record has its own key), and the run goes on from the one kept instead.
"""

from __future__ import annotations

from collections.abc import Callable

from framework.coordination.entry_order import progress
from framework.coordination.registry import TopicEntry, TopicRegistry
from framework.growth.expand_checks import ExpandError

__all__ = ["elsewhere", "recorded_meanwhile", "write_kept"]


def recorded_meanwhile(
    registry: TopicRegistry, topic: str, reached: tuple[int, int]
) -> TopicEntry | None:
    """The registry's entry of ``topic`` read again after a measurement, when it is already
    as far as ``reached`` (``entry_order.progress``): another run took the step being taken
    (or went further) since this run last read it; ``None``: write this run's own.

    Adopting it is what keeps the record valid: its values were measured before it was
    written, and producers may have switched by it (records placed with the new count at or
    after its starts and holds)."""
    current = registry.read().get(topic)
    return current if current is not None and progress(current) >= reached else None


def write_kept(
    registry: TopicRegistry, entry: TopicEntry, report: Callable[[str], None]
) -> TopicEntry:
    """Write ``entry`` and return the entry the registry kept for its topic: ``entry``, or
    the record of another run written first."""
    registry.write(entry)
    kept = registry.read().get(entry.topic)
    if kept is None:
        raise ExpandError(
            f"the registry entry of {entry.topic!r} was removed (tombstones of its keys) while "
            "`expand` ran. Fix: write its last entry again (`splitstate status` shows it), "
            "then run `expand` again."
        )
    if kept != entry:
        report(f"another run recorded the change of {entry.topic} first; going on from its record")
    return kept


def elsewhere(entry: TopicEntry, index: int, partitions: int) -> bool:
    """Whether the registry went past the change to ``partitions`` whose count is (or will
    be) ``entry.history.counts[index]``: a later change is announced or recorded (this one
    is done), or another change took its place."""
    counts = entry.history.counts
    if len(counts) > index + 1:
        return True
    if len(counts) == index + 1:
        return counts[index] != partitions or entry.announced is not None
    announced = entry.announced
    return announced is not None and announced.partitions != partitions
