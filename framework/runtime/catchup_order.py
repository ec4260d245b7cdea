"""A catch-up's records in the canonical order (``time.input_order: canonical``).

A receiver of a scale reads S2 (``framework.runtime.catchup``) as a **reader with ends**: each
partition's end is where it may be applied to now (T1, the group's committed offset, while it
catches up; exactly F once released; an ancestor's or a deleted partition's bound), and every
record it reads below its end goes into a ``framework.order.MergeBuffer`` (records read past
it wait in the catch-up's ``ReadAhead``). What the buffer releases is applied, in each key's
canonical order, as the old owner applied it (but for a growth child whose base is not known
here: below): the old owner's committed offsets are a prefix of every key's canonical order,
so a partition read up to its end blocks nothing, and a key's record is released only once
every record that precedes it in that prefix was.

- **Marks** are a partition's fact: every record read counts (not only the gained keys'), a
  tick's floor too (a forced tick the old owner wrote is a tick in the log, read like any).
- **Progress**: a step commits, in the catch-up's progress scope, what the buffer applied
  (``MergeBuffer.applied_positions``: a record read and not released is read again after a
  restart) and, in ``mark_scope`` (same write), each partition's mark there; a restart goes
  on from both. At the release the marks at F are handed to the live ``ORDER_SCOPE``
  (``completions.complete_offsets``), so the live loop goes on with the same marks.
- **Bulk starts** carry their marks into ``mark_scope`` (a Spark build's, a snapshot
  transfer's). A partition to be read from an offset whose mark is not known there (a bulk
  build that stored none, a catch-up of an earlier splitstate) is read from the start of its
  life instead, for its marks only: what lies below that offset was applied already and is
  not applied again (``floors``).
- **Growth children** read from their life's start take their base (the parent's mark at the
  marker): the one stored with their start in ``mark_scope``, or kept in the state
  (``growth-base``, a Spark build's), else the parent's, which the catch-up reads up to the
  marker (its bound): a parent read from past the marker is read from its life's start
  instead, so its mark there is known. A child whose parent is not read here up to a
  recorded marker starts from no mark (a warning says so): its keys' order may differ.
- **Shrink survivors** read from before their hold are linked to their deleted partitions
  (``framework.runtime.survivors``, as the live loop's): S2 reads each deleted partition up to
  its drain marker (its bound), where it is closed, and from the hold on the survivor's marks
  are at least each one's final mark and its items have the shrink's lineage rank (one whose
  progress is at its bound with no mark stored is read again from its life's start).
- **Crash suspects**: ``step`` releases at most the step's ``max_records`` records that
  apply here (one while records that killed the receiver are suspect), so a death counts
  against that record alone and only it is skipped, as the old owner's one record per batch.
- **Stored marks** are read back checked (``framework.stored_marks``): one that is not a mark
  is refused naming the catch-up's scope and the fix.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from framework.app import App
from framework.coordination.registry import TopicEntry
from framework.input_times import GROWTH_BASE_SCOPE, GROWTH_LIFE_SCOPE, InputTimes
from framework.kafka import Message
from framework.order import NO_FLOOR, MergeBuffer
from framework.runtime.growth_bases import Life, life_of
from framework.runtime.survivors import close_drained, link_survivors, merged_at
from framework.snapshots.source_starts import mark_scope
from framework.stored_marks import stored_marks
from framework.time.ticks import is_tick_key
from rebalance import Grow, TopicHistory
from rebalance.positions import Position
from statestore import ProcessorDatabase, StateBatch

__all__ = ["CatchUpOrder", "life_start"]

log = logging.getLogger(__name__)

#: a record read: the message, its position, its offset, and whether it applies here
Taken = tuple[Message, Position, int, bool]


def life_start(history: TopicHistory, partition: int, offset: int) -> int:
    """The first offset of the life of ``partition`` that ``offset`` lies in (0: its first)."""
    starts = [
        step.starts[partition]
        for step in history.steps
        if isinstance(step, Grow) and partition in step.starts
    ]
    return max((start for start in starts if start <= offset), default=0)


class CatchUpOrder:
    """The merge of a catch-up's reading (module docstring): ``app``'s inputs, ``topics``
    their histories, progress kept in ``scope`` (marks in ``mark_scope(scope)``)."""

    def __init__(self, app: App, topics: Mapping[str, TopicHistory], scope: str) -> None:
        self._app_inputs = [topic.topic for topic in app.config.inputs]
        self._times = InputTimes(app)
        self._topics = topics
        self.scope = scope
        #: the progress scope of the marks at the catch-up's progress
        self.mark_scope = mark_scope(scope)
        self._buffer: MergeBuffer[Taken] = MergeBuffer(self._app_inputs)  # (see ``start``)
        #: per partition read again from below its progress, the progress (applied below it)
        self.floors: dict[Position, int] = {}
        #: per partition, its end given to the buffer
        self._ends: dict[Position, int] = {}
        #: per partition, the next offset to add
        self._next: dict[Position, int] = {}
        #: per partition, the progress and mark last committed
        self._given: dict[Position, tuple[int, int | None]] = {}
        #: the deleted partitions closed in the merge (read past their drain markers)
        self._closed: set[Position] = set()

    # -- where to read from -----------------------------------------------------------------

    def start(
        self,
        progress: Mapping[Position, int],
        database: ProcessorDatabase,
        bounds: Mapping[Position, int | None] | None = None,
    ) -> dict[Position, int]:
        """Assign every partition of ``progress`` (the catch-up's, each partition's next
        offset to apply) with its mark there (``database``'s ``mark_scope``); returns where to
        read each from (below its progress for one whose mark there is not known, unless it
        is read up to its bound in ``bounds`` already and no child needs its mark)."""
        read = {topic for topic, _partition in progress}
        # (an input none of whose partitions is read here holds no gained key's record)
        self._buffer = MergeBuffer([topic for topic in self._app_inputs if topic in read])
        marks = stored_marks(
            database.backend,
            self.mark_scope,
            f"the catch-up {self.scope} of processor {database.identity.processor}",
            "abort the scale (`splitstate scale MODULE:APP --abort`) and scale again: the "
            "next scale's catch-up keeps its progress and marks in scopes of its own.",
        )
        kept = _kept_bases(database)
        reads = dict(progress)
        sources = self._survivor_sources(progress)
        lives: dict[Position, Life] = {}
        bases: dict[Position, int] = {}
        # children first (a child's partition is above its parent's): one that needs its
        # parent's mark at the marker makes the parent be read from before it
        for position in sorted(progress, key=lambda p: (p[0], -p[1])):
            topic, partition = position
            at = reads[position]
            if position in marks and at == progress[position]:
                bases[position] = marks[position]
                continue
            bound = (bounds or {}).get(position)
            if (
                bound is not None
                and at == progress[position]
                and at >= bound
                and position not in sources  # (a survivor takes its final mark)
            ):
                bases[position] = NO_FLOOR  # (nothing to read: its marks hold nothing back)
                continue
            history = self._topics[topic]
            at = reads[position] = life_start(history, partition, at)
            life = life_of(TopicEntry(history), position, at)
            if life is None:
                bases[position] = NO_FLOOR  # (a partition's first life, read from 0)
            elif kept.get(position, (None, 0))[0] == at:
                bases[position] = kept[position][1]
            else:
                lives[position] = life
                marker, parent = life.marker, life.parent
                if marker is not None and parent in reads and reads[parent] > marker:
                    history = self._topics[parent[0]]
                    reads[parent] = life_start(history, parent[1], marker)
        for position, at in sorted(reads.items()):
            if at < progress[position]:
                self.floors[position] = progress[position]
            self._assign(position, at, bases.get(position), lives.get(position), reads)
        link_survivors(self._buffer, self._entries(), self._next, progress, marks)
        self._close_drained()
        for position, at in self.floors.items():
            log.info(
                "catch-up %s: %s[%d] is read from %d for its marks (not known at %d, where "
                "its progress is; nothing below that is applied again)",
                self.scope, position[0], position[1], reads[position], at,
            )  # fmt: skip
        return reads

    def _entries(self) -> dict[str, TopicEntry]:
        """The read topics' histories as registry entries (``framework.runtime.survivors``)."""
        read = {topic for topic, _partition in self._next}
        return {topic: TopicEntry(self._topics[topic]) for topic in read}

    def _survivor_sources(self, progress: Mapping[Position, int]) -> set[Position]:
        """The deleted partitions of ``progress`` whose final marks a survivor of it read
        from before its hold takes."""
        sources: set[Position] = set()
        for (topic, partition), at in progress.items():
            found = merged_at(self._topics[topic], partition, at)
            if found is not None:
                sources.update((topic, deleted) for deleted, _needed in found[1])
        return sources & set(progress)

    def _close_drained(self) -> None:
        """Close each deleted partition read past its drain marker: its survivors take its
        final mark (``framework.runtime.survivors.close_drained``)."""
        close_drained(self._buffer, self._entries(), self._next, self._closed)

    def _assign(
        self,
        position: Position,
        at: int,
        base: int | None,
        life: Life | None,
        reads: Mapping[Position, int],
    ) -> None:
        topic, partition = position
        rank = self._topics[topic].rank(partition, at)
        self._next[position] = at
        if base is not None:
            self._buffer.assign(position, at, base, rank)
            return
        assert life is not None
        parent, marker = life.parent, life.marker
        if marker is not None and parent in self._next and reads[parent] <= marker:
            self._buffer.assign(position, at, NO_FLOOR, rank, parent=(parent, marker))
            return
        log.warning(
            "catch-up %s: the base of growth child %s[%d] is not known (its parent is not "
            "read here up to its marker): it starts from no mark, as before canonical "
            "catch-ups, and its keys' order may differ from their old owner's",
            self.scope, topic, partition,
        )  # fmt: skip
        self._buffer.assign(position, at, NO_FLOOR, rank)

    # -- reading ----------------------------------------------------------------------------

    def add(self, message: Message, position: Position, offset: int, applies: bool) -> None:
        """The record at ``offset`` of ``position`` (below its end), read after the ones
        before it; ``applies``: whether it applies here (``Applies.record``)."""
        if offset < self._next[position]:
            return
        topic, partition = position
        event_time = self._times.of(topic, partition, offset, message)
        key = message.key()
        if key is not None and is_tick_key(topic, key):
            key = None  # (a compacted topic's tick)
        applies = applies and offset >= self.floors.get(position, 0)
        self._buffer.add(position, offset, key, event_time, (message, position, offset, applies))
        self._next[position] = offset + 1
        if position[1] >= self._topics[topic].partitions and position not in self._closed:
            self._close_drained()

    def passed(self, moved: Mapping[Position, int]) -> None:
        """The reader's positions moved past what is not a record (``moved``)."""
        for position, offset in moved.items():
            if offset > self._next[position]:
                self._buffer.passed(position, offset)
                self._next[position] = offset
        self._close_drained()

    def ends(self, ends: Mapping[Position, int | None]) -> None:
        """Each partition may be applied up to its end now (T1, F, its bound; ``None``: not
        limited now), before the records read below it are added."""
        for position, given in ends.items():
            if given is None:
                continue
            end = max(given, self._next[position])  # (at-least-once: taken over past F)
            if self._ends.get(position) != end:
                self._ends[position] = end
                self._buffer.end(position, end)

    def step(
        self, passed: Mapping[Position, int], moved: dict[Position, int], most: int | None = None
    ) -> tuple[list[Taken], Callable[[StateBatch], None]]:
        """After a step's records were ``add``-ed (below the ``ends`` given before them): the
        reader ``passed`` what is not a record; the records to apply (at most ``most`` that
        apply here: ``release``), in order, and what writes their progress (``commit``;
        ``moved`` becomes the progress written)."""
        self.passed(passed)
        taken = self.release(most)

        def write(batch: StateBatch) -> None:
            moved.clear()
            moved.update(self.commit(batch))

        return taken, write

    def release(self, most: int | None = None) -> list[Taken]:
        """The records to apply now, in their keys' canonical order: at most ``most`` that
        apply here (one while crash suspects remain, so a death names its record alone, as
        the old owner's one record per batch does); the rest stay, released by a later call."""
        if most is None:
            return [item.payload for item in self._buffer.release()]
        taken: list[Taken] = []
        applying = 0
        while applying < most:
            released = [item.payload for item in self._buffer.release(most - applying)]
            if not released:
                break
            taken += released
            applying += sum(1 for *_, applies in released if applies)
        return taken

    def waiting(self) -> bool:
        """Whether a record read waits (not released yet)."""
        return any(self._buffer.unapplied(position) for position in self._next)

    def commit(self, batch: StateBatch) -> dict[Position, int]:
        """Write, with ``batch``, the progress of what was released (each partition's mark
        there in ``mark_scope``) where it moved; returns the progress written."""
        marks = self._buffer.applied_marks()
        moved: dict[Position, int] = {}
        for position, offset in self._buffer.applied_positions().items():
            if offset < self.floors.get(position, 0):
                continue  # (read for its marks, below what was applied already)
            self.floors.pop(position, None)
            mark = marks.get(position)
            if self._given.get(position) == (offset, mark):
                continue
            self._given[position] = (offset, mark)
            batch.set_progress(self.scope, position[0], position[1], offset)
            moved[position] = offset
            if mark is not None:
                batch.set_progress(self.mark_scope, position[0], position[1], mark)
        return moved


def _kept_bases(database: ProcessorDatabase) -> dict[Position, tuple[int, int]]:
    """The growth bases the state keeps (a Spark build's): per child, (its life's start, its
    base)."""
    bases = database.progress(GROWTH_BASE_SCOPE)
    lives = database.progress(GROWTH_LIFE_SCOPE)
    return {p: (start, bases[p]) for p, start in lives.items() if p in bases}
