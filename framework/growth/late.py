"""Late records: a keyed record that sits where its key does not live at its offset.

Each step of a topic's history (a growth or a shrink) starts to apply in a partition at a
boundary (``TopicHistory.boundaries``): after a growth's marker in a parent, the keys split
off to the child live in the child; after a deleted partition's drain marker, its keys live
in their survivor; before a re-grown partition's new life starts, no key lives there.
``TopicHistory.home_at(h, partition, offset)`` is where the step in force at a record's
position places its key. A record whose home is not its partition is *late*: its producer
placed it with the count before that step and paused for longer than its lease before sending
it (with the ``splitstate.count`` header), or it does not follow the fence at all (without).
Processed there, it would come after the key's newer records elsewhere, so it is a dead
letter (stage ``placement``, reason ``late: ...``).
"""

from __future__ import annotations

import bisect

from framework.growth.placement import COUNT_HEADER, history_layouts
from rebalance import TopicHistory, key_hash
from rebalance.steps import Boundary

__all__ = ["Homes", "late_reason", "late_record"]

#: ``(low, split)`` of a partition count, as ``bucket`` computes them
_Layout = tuple[int, int]


class Homes:
    """``history.home_at``, fast enough for every record read: each partition's boundary
    offsets and the layouts of the counts in force between them, computed once."""

    def __init__(self, history: TopicHistory) -> None:
        self.history = history
        self._layouts = history_layouts(history.counts)  # of each step's count
        self._partitions: dict[int, tuple[tuple[int, ...], tuple[_Layout, ...]]] = {}

    def home(self, h: int, partition: int, offset: int) -> int:
        """The partition key hash ``h`` lives in at ``offset`` of ``partition``."""
        found = self._partitions.get(partition)
        if found is None:
            found = self._partitions[partition] = self._index(partition)
        offsets, layouts = found
        low, split = layouts[bisect.bisect_right(offsets, offset)]
        b = h % low  # bucket(h, N, count in force), inlined
        return h % (low << 1) if b < split else b

    def _index(self, partition: int) -> tuple[tuple[int, ...], tuple[_Layout, ...]]:
        """``partition``'s boundary offsets, and the layout in force before the first of them
        and from each on."""
        if not 0 <= partition < self.history.created:
            return (), (self._layouts[-1],)  # not the app's: judged by the current count
        offsets: list[int] = []
        layouts = [self._layouts[0]]
        latest = 0
        for boundary in self.history.boundaries(partition):
            latest = max(latest, boundary.step)
            offsets.append(boundary.offset)
            layouts.append(self._layouts[latest])
        return tuple(offsets), tuple(layouts)


def late_record(key: bytes, where: tuple[str, int, int], history: TopicHistory) -> str | None:
    """Why a keyed record at ``where`` (topic, partition, offset), whose ``splitstate.count``
    header places it there, may not be processed: its key lives elsewhere at that offset
    (``history.home_at``); ``None`` if it may."""
    _topic, partition, offset = where
    home = history.home_at(key_hash(key), partition, offset)
    return None if home == partition else late_reason(key, where, history, home, header=True)


def late_reason(
    key: bytes, where: tuple[str, int, int], history: TopicHistory, home: int, *, header: bool
) -> str:
    """Why the record of ``key`` at ``where``, whose key lives in ``home`` there, is not
    processed: with the ``splitstate.count`` header its producer paused past its lease;
    without, it does not follow the fence at all."""
    moved = _moved(key, where, history, home)
    if not header:
        return (
            f"late: no {COUNT_HEADER} header, and its {moved}: its producer placed it with a "
            "count from before that change, and a producer without the header does not follow "
            "the fence. Processing it here would apply it after the key's newer records, so "
            "it was not processed. Fix: write with framework.SplitstateProducer, which places "
            "keys with the current count under a lease, then send the record again."
        )
    return (
        f"late: {moved}: its producer placed it with the count before that change and paused "
        "(a suspended machine, a long GC pause) for longer than its lease before sending it. "
        "Processing it here would apply it after the key's newer records, so it was not "
        "processed. Fix: send the record again (SplitstateProducer places it with the current "
        "count)."
    )


def _moved(key: bytes, where: tuple[str, int, int], history: TopicHistory, home: int) -> str:
    """Where ``key`` went, and which boundary the record at ``where`` lies past."""
    topic, partition, offset = where
    step = history.step_at(partition, offset)
    count = history.counts[step]
    boundary = _in_force(history.boundaries(partition), step, offset)
    if boundary is not None and boundary.kind == "marker":
        return (
            f"key {key!r} moved to {topic}[{home}] when the topic grew to {count} partitions, "
            f"and this record landed in {topic}[{partition}] after that partition's marker "
            f"(offset {boundary.offset - 1})"
        )
    if boundary is not None and boundary.kind == "drain":
        return (
            f"key {key!r} moved to {topic}[{home}] when the topic shrank to {count} "
            f"partitions and {topic}[{partition}] was deleted, and this record landed there "
            f"after its drain marker (offset {boundary.offset - 1})"
        )
    since = "" if boundary is None else f" from offset {boundary.offset}"
    return (
        f"key {key!r} lives in {topic}[{home}] where this record landed in "
        f"{topic}[{partition}] (the topic's {count} partitions are in force there{since})"
    )


def _in_force(boundaries: tuple[Boundary, ...], step: int, offset: int) -> Boundary | None:
    """The boundary at or below ``offset`` that brought ``step`` (the last such)."""
    found = None
    for boundary in boundaries:
        if boundary.offset > offset:
            break
        if boundary.step == step:
            found = boundary
    return found
