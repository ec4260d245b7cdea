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
    offsets and the layouts of the counts in force between them, computed once; and which
    keys a tick takes by the steps its writer knew (``takes_tick``)."""

    def __init__(self, history: TopicHistory) -> None:
        self.history = history
        self._layouts = history_layouts(history.counts)  # of each step's count
        self._partitions: dict[int, tuple[tuple[int, ...], tuple[_Layout, ...]]] = {}
        self._ticks: dict[tuple[int, int], tuple[tuple[int, ...], tuple[tuple[_Layout, ...], ...]]]
        self._ticks = {}

    def home(self, h: int, partition: int, offset: int) -> int:
        """The partition key hash ``h`` lives in at ``offset`` of ``partition``."""
        found = self._partitions.get(partition)
        if found is None:
            found = self._partitions[partition] = self._index(partition)
        offsets, layouts = found
        low, split = layouts[bisect.bisect_right(offsets, offset)]
        b = h % low  # bucket(h, N, count in force), inlined
        return h % (low << 1) if b < split else b

    def takes_tick(self, h: int, partition: int, offset: int, steps: int | None) -> bool:
        """Whether key hash ``h`` takes a tick at ``offset`` of ``partition`` whose writer
        knew the history's first ``steps`` steps (``None``: all of them): it lives there by
        those steps, and no later step moved it away at a boundary there at or before
        ``offset`` (a growth's marker, a shrink's drain marker: both in the partition itself,
        so every reader met them). A later step that brought keys there (a shrink's hold, a
        growth's start) brings the tick none: its writer did not know them, and a reader may
        not know that step yet (its hold was measured before the registry recorded it).
        So every reader whose view holds ``steps`` steps judges the tick alike, and the keys
        taking it all live there by the whole history too."""
        if steps is None or steps >= len(self.history.steps):
            return self.home(h, partition, offset) == partition
        found = self._ticks.get((partition, steps))
        if found is None:
            found = self._ticks[(partition, steps)] = self._tick_index(partition, steps)
        offsets, layouts = found
        for low, split in layouts[bisect.bisect_right(offsets, offset)]:
            b = h % low  # bucket(h, N, count), inlined
            if (h % (low << 1) if b < split else b) != partition:
                return False
        return True

    def _tick_index(
        self, partition: int, steps: int
    ) -> tuple[tuple[int, ...], tuple[tuple[_Layout, ...], ...]]:
        """``takes_tick``'s ``partition`` for a writer that knew ``steps`` steps: its boundary
        offsets, and before the first of them and from each on, the layouts a key must be
        placed there by (the known step in force, each later step that moved keys away)."""
        if not 0 <= partition < self.history.created:
            return (), ((self._layouts[-1],),)  # not the app's: judged by the current count
        offsets: list[int] = []
        layouts: list[tuple[_Layout, ...]] = [(self._layouts[0],)]
        latest = 0
        away: tuple[_Layout, ...] = ()
        for boundary in self.history.boundaries(partition):
            if boundary.step <= steps:
                latest = max(latest, boundary.step)
            elif boundary.kind in ("marker", "drain"):
                away = (*away, self._layouts[boundary.step])
            offsets.append(boundary.offset)
            layouts.append((self._layouts[latest], *away))
        return tuple(offsets), tuple(layouts)

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
