"""Which ticks of a bulk build's history apply to a key, and where among its records.

Live, a tick applies to the keys that live in its partition at its offset
(``PlacementCheck.lives_at``, by the topic's history) and have something due by it, and it
meets each such key between the key's records as they sit in the log. The fold replays that
key by key: ``KeySpans.spans`` lists the stretches of input partitions a key lives in, in the
lineage order its records are applied in (``(rank, offset)``, ``history.ranks_of``); a key
moved by a growth lives in its parent up to the marker and in the child from its start, so
its parent's later ticks and its child's earlier ones are not in its spans. ``KeyTicks`` walks
the ticks of those spans together with the key's records and applies each tick that makes
something of the key due (its ``splitstate.due`` times against the tick's floor and
processing time, as ``StateBatch.due_keys`` compares them), found with
``PartitionTicks.first_due``: a tick that would change nothing for the key costs it nothing.
A tick whose writer knew fewer steps of the history than the build reaches fewer keys than
the spans say (``Homes.takes_tick``, never more): applied through ``RecordProcessor``, it
changes only the keys it takes.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from framework.bootstrap.history import ranks_of
from framework.bootstrap.tick_table import TickTable
from rebalance import TopicHistory, bucket, key_hash
from rebalance.positions import Position
from statestore.due_index import NEVER

__all__ = ["END", "KeySpans", "KeyTicks", "Span"]

#: past every offset and rank
END = (1 << 63) - 1

#: one stretch of a partition: ``(start, end, rank, count in force)``
_Stretch = tuple[int, int, int, int]


@dataclass(frozen=True, order=True)
class Span:
    """Offsets ``[start, end)`` of ``position`` where a key lives, at lineage ``rank``."""

    rank: int
    position: Position
    start: int
    end: int


class KeySpans:
    """Where keys live in the input partitions that have ticks, by the topics' histories
    (``histories``: every input topic's, in config order)."""

    def __init__(self, histories: Mapping[str, TopicHistory], ticks: TickTable) -> None:
        self._ranks = ranks_of(histories)
        self._initial = {name: h.initial_partitions for name, h in histories.items()}
        self._counts = {name: sorted(set(h.counts)) for name, h in histories.items()}
        #: topic -> partition -> its stretches (only partitions that have ticks)
        self._stretches: dict[str, dict[int, list[_Stretch]]] = {}
        for position in ticks.partitions:
            topic, partition = position
            history = histories.get(topic)
            if history is None or position not in self._ranks:
                continue  # no key lives there by the histories: its ticks apply to none
            offsets, ranks = self._ranks[position]
            ends = [*offsets[1:], END]
            self._stretches.setdefault(topic, {})[partition] = [
                (start, end, rank, history.counts[history.step_at(partition, start)])
                for start, end, rank in zip(offsets, ends, ranks, strict=True)
            ]

    def rank(self, topic: str, partition: int, offset: int) -> int | None:
        """The lineage rank of a record (``None``: a partition the histories do not have)."""
        found = self._ranks.get((topic, partition))
        if found is None:
            return None
        offsets, ranks = found
        return ranks[bisect.bisect_right(offsets, offset) - 1]

    def spans(self, key: bytes) -> list[Span]:
        """The stretches of the partitions with ticks where ``key`` lives, in lineage order."""
        h = key_hash(key)
        found = []
        for topic, partitions in self._stretches.items():
            n = self._initial[topic]
            for partition in {bucket(h, n, count) for count in self._counts[topic]}:
                for start, end, rank, count in partitions.get(partition, ()):
                    if bucket(h, n, count) == partition:
                        found.append(Span(rank, (topic, partition), start, end))
        found.sort()
        return found


class KeyTicks:
    """Applies a key's due ticks among its records: ``until`` the next record's position,
    then ``until(END, END)`` after its last one.

    ``due()`` reads the key's earliest ``(event, wall)`` due times now; ``apply(position,
    index)`` applies the ``index``-th tick of ``position`` to the key."""

    def __init__(
        self,
        spans: list[Span],
        ticks: TickTable,
        due: Callable[[], tuple[int, int]],
        apply: Callable[[Position, int], None],
    ) -> None:
        self._spans = spans
        self._ticks = ticks
        self._due = due
        self._apply = apply
        self._next = 0  # the span walked now
        self._low = -1  # the next tick of that span to look at (-1: its first)

    def until(self, rank: int, offset: int) -> None:
        """Apply the due ticks before ``(rank, offset)``, in order."""
        spans = self._spans
        while self._next < len(spans):
            span = spans[self._next]
            if span.rank > rank:
                return
            ticks = self._ticks.partitions[span.position]
            if self._low < 0:
                self._low = ticks.index(span.start)
            end = span.end if span.rank < rank else min(span.end, offset)
            high = ticks.index(end)
            while self._low < high:
                event, wall = self._due()
                if event == NEVER and wall == NEVER:
                    self._low = high  # nothing due: no tick here changes the key
                    break
                at = ticks.first_due(self._low, high, event, wall)
                if at < high:
                    self._apply(span.position, at)
                self._low = min(at + 1, high)
            if end < span.end:
                return  # the record comes first
            self._next += 1
            self._low = -1
