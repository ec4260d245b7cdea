"""The live loop's canonical order of several inputs (``time.input_order: canonical``).

An app with several input topics and ``input_order: canonical`` does not apply records as
fetched: each record the loop reads (admitted: owned, past the ordering gates) goes into a
``framework.order.MergeBuffer``, and the batch processes only what it releases, in each key's
canonical order (event time as read, then the input's place in the config, then lineage rank,
then offset).

- **Offsets**: a batch commits ``MergeBuffer.applied_positions`` (a record read and not
  released is not committed: a restart reads it again), with each partition's mark there in
  the progress scope ``ORDER_SCOPE``, in the same state write; a restart assigns each
  partition from the state's offset with that mark as base. ``waiting`` names the partitions
  whose read records are not applied yet: the loop's pass-over must not move their offsets.
- **Nothing read is lost**: whatever drops or rewinds batches (an aborted transaction, a size
  refusal, a failed send) calls ``rewind``: every partition is read again from the state's
  offset (records held in the buffer included), with the stored marks. A partition the loop
  stops reading (a release) is ``forget``-ten with what it held: not committed, so its next
  reader reads it. Records a gate holds never enter the buffer (they are cut before).
- **Lineage**: each partition's rank is its lineage rank where it starts
  (``TopicHistory.rank``). A growth child read from its life's start takes its base, its
  parent's mark at its marker, as recorded (``framework.runtime.growth_bases``: found by
  whoever reads the parent past the marker, kept with that batch, published to the control
  log), or waits for it: nothing of it is released or committed past its start until then,
  the records it holds bound its ``R`` from above (they hold the other inputs back), and
  while its parent is read here and not past the marker, the parent's mark bounds its ``R``
  from below (a child its gate holds does not hold the other inputs back below it; read
  apart from its parent it does until its gate opens). A shrink's deleted partition read up
  to its drain marker (as the registry has it, checked at each ``take``, ``follow`` and
  ``rewind``) is ``close``-d: its last mark no longer holds the other inputs back (a child's
  records held for its base still do). A survivor assigned at or before its hold is linked
  to its deleted partitions (``MergeBuffer.merging``): from the hold on its marks are at
  least the final mark of each, read here (its mark when closed) or, drained and committed
  here before, stored with its offset (its items wait unadded until they are known), and
  its rank is the shrink's (``TopicHistory.rank`` at the hold: above theirs).
- **The bounded wait**: while something waits that is not a forced tick (a record, a marker,
  a tick of the time writer: ``MergeBuffer.wanted``) and the least such item stays blocked
  (``MergeBuffer.waited_for``: by the partitions whose mark is below what releases it and
  the forced ticks read before it), each partition that blocks it is timed on its own, from
  when it began to block after its last record was read (not per record: a new record read
  *from it* restarts its timer, one read elsewhere does not); one that blocked for
  ``time.max_input_wait`` gets a **forced tick** with floor ``Blocker.needs``, written in the
  batch's transaction like any tick, so every reader of the partition sees the same
  decision; read back, it raises the partition's mark. The forced ticks of one decision
  release that item (one per partition that blocks it, not one per step of time). So a
  quiet input costs one wait, then forced ticks each batch while it stays quiet and a record
  waits, not a wait per record; once only forced ticks wait, none is forced (they would
  answer each other for ever) and the timers stop. A forced tick is written once per floor
  and partition (again after a dropped batch, or when the producer left it out:
  ``not_written``); it is kept apart from the time ticks' writer
  (``framework.runtime.ticking``), whose "unread tick" it is not. A forced tick says so
  (``framework.time.ticks.FORCED_HEADER``), so one read again (after a rewind, a restart, by
  another processor) is an errand still; a tick that does not say so (the time writer's, one
  of before they said so) is waited for, even with the floor of a forced tick decided here
  (``framework.runtime.errands``): an old forced one costs at most one more forced tick.

A restored snapshot carries the marks (they are in the database it copies), and a backfill's
Spark build stores them with the offsets it builds to (``framework.bootstrap.order_cut``); a
catch-up applies its gained keys in the same order, hands its marks over at F
(``framework.runtime.catchup_order``; a growth child whose parent it does not read up to the
marker excepted). ``take`` releases at most a batch's records (one while crash suspects
remain: a death names its record alone, as under ``arrival``). Not covered yet: a Spark
build of an app that keeps time or whose inputs shrank is refused; a survivor takes a
deleted partition's final mark only when this processor reads it or drained it before
(``docs/concepts/time.md``: "Several inputs"; known faults: strict xfails in
``tests/framework/order``). Marks are read back checked (``framework.stored_marks``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

from framework.app import App
from framework.clock import Clock
from framework.coordination.registry import TopicEntry
from framework.input_times import ORDER_SCOPE, InputTimes, ordered
from framework.kafka import Message
from framework.order import NO_FLOOR, MergeBuffer
from framework.runtime.errands import Errands
from framework.runtime.growth_bases import ChildBases, GrowthBases, MemoryBases
from framework.runtime.survivors import close_drained, link_survivors, open_deleted
from framework.runtime.ticking import Tick
from framework.stored_marks import order_marks
from framework.time.ticks import is_tick_key, is_tick_message, tick_key
from rebalance.positions import Position
from statestore import ProcessorDatabase, StateBatch

__all__ = ["ORDER_SCOPE", "InputOrder", "input_order_of", "ordered"]

if TYPE_CHECKING:
    from framework.processing import RecordProcessor
    from framework.runtime.assignment import Assignment

log = logging.getLogger("framework.runtime.loop")

#: a record to process: the message, its topic, partition and offset
Taken = tuple[Message, str, int, int]


class _Steps(Protocol):
    def known_steps(self, topic: str, /) -> int:
        """How many steps of ``topic``'s partition history the view has."""


class InputOrder:
    """The merge of a processor's input partitions (see the module). ``database``: its state;
    ``steps``: its ``PlacementCheck`` (the history steps ticks name); ``inputs``: the input
    topics' registry entries now; ``clock`` the run's; ``bases``: where growth children's bases
    are recorded (the app's control log; in memory by default: one process)."""

    def __init__(
        self,
        app: App,
        database: ProcessorDatabase,
        clock: Clock,
        *,
        steps: _Steps,
        inputs: Callable[[], Mapping[str, TopicEntry]],
        bases: GrowthBases | None = None,
    ) -> None:
        config = app.config
        #: the app's id (its ticks name it)
        self.app_id = config.app_id
        self._topics = [topic.topic for topic in config.inputs]
        self._times = InputTimes(app)
        self._database = database
        self._clock = clock
        self._steps = steps
        self._inputs = inputs
        self._wait = config.time.wait_seconds
        self._buffer: MergeBuffer[Message] = MergeBuffer(self._topics)
        #: the partitions assigned, each with the next offset to add (read again below: skipped)
        self._next: dict[Position, int] = {}
        #: the first offset added to each partition since it was assigned (where to read a
        #: partition without a state offset again from)
        self._first: dict[Position, int] = {}
        #: per partition, the next offset handed to a batch to commit
        self._given: dict[Position, int] = {}
        #: per partition blocking the least head, since when (monotonic)
        self._blocked_since: dict[Position, float] = {}
        #: per partition, the floor of the forced tick decided for it and not read back yet
        self._forced: dict[Position, int] = {}
        #: the forced ticks written here (read, an errand of the merge: nothing waits for it)
        self._errands = Errands()
        #: per partition, the mark given to a batch with its offset (below ``NO_FLOOR``: a
        #: child's offset given before its base was known)
        self._given_marks: dict[Position, int] = {}
        #: the growth children's bases: found, kept, published, waited for
        self._bases = ChildBases(bases or MemoryBases(), database, self._buffer, inputs)
        #: the deleted partitions closed in the merge (read past their drain markers)
        self._closed: set[Position] = set()
        #: forced ticks decided (for tests and metrics)
        self.forced = 0

    # -- which partitions -------------------------------------------------------------------

    def follow(self, owned: Iterable[Position]) -> None:
        """Read exactly ``owned``: a partition no longer read is forgotten with the records it
        held (not committed: its next reader reads them); a new one is read from the state's
        offset, its stored mark the base."""
        owned = set(owned)
        for position in [p for p in self._next if p not in owned]:
            self._forget(position)
        added = [p for p in owned if p not in self._next and p[0] in self._topics]
        if added:
            offsets, marks = self._database.offsets(), order_marks(self._database)
            for position in sorted(added):
                self._assign(position, offsets.get(position), marks.get(position))
            link_survivors(self._buffer, self._inputs(), self._next, offsets, marks)
            self._close_drained()
        self._bases.resolve()

    def waiting(self) -> set[Position]:
        """The partitions with records read and not released (a survivor's stash too), and the
        growth children waiting for their base (their offsets stay at their life's start)."""
        buffer = self._buffer
        return {p for p in self._next if buffer.unapplied(p) or not buffer.based(p)}

    # -- records ----------------------------------------------------------------------------

    def take(
        self,
        records: Iterable[Taken],
        owned: Iterable[Position] | None = None,
        most: int | None = None,
    ) -> list[Message]:
        """Add ``records`` (admitted, in each partition's offset order; given ``owned``, the
        partitions read now: ``follow`` first) and return what may be applied now, in the
        order to apply it: at most ``most`` (a batch's; one while crash suspects remain, so a
        death names its record alone), the rest released by a later ``take``."""
        if owned is not None:
            self.follow(owned)
        buffer, times, nexts = self._buffer, self._times, self._next
        deleted = open_deleted(self._inputs(), nexts, self._closed)
        for message, topic, partition, offset in records:
            position = (topic, partition)
            expected = nexts.get(position)
            if expected is None or offset < expected:
                continue  # not read here, or added already (fetched again)
            self._first.setdefault(position, offset)
            event_time = times.of(topic, partition, offset, message)
            key = message.key()
            wanted = True
            if key is not None and is_tick_key(topic, key):
                key = None  # (a compacted topic's tick)
                wanted = self._errands.tick_wanted(message, position, offset, event_time)
            elif key is not None:  # a record of it: its wait, if it blocks, starts again
                self._blocked_since.pop(position, None)
            elif is_tick_message(topic, message):
                wanted = self._errands.tick_wanted(message, position, offset, event_time)
            buffer.add(position, offset, key, event_time, message, wanted=wanted)
            nexts[position] = offset + 1
            if position in deleted:  # (closed at its drain marker: its mark there is final)
                self._close_drained()
            self._bases.marker_read(position, offset, message)  # (a growth marker: a base)
        self._bases.resolve()
        self._bases.publish_stored()
        self._close_drained()
        released = [item.payload for item in buffer.release(most)]
        self._blockers(self._clock.monotonic())  # (a partition's wait starts as it blocks)
        return released

    def applied(self, batch: StateBatch) -> dict[Position, int]:
        """The next offsets a batch that applied every record released so far commits (those
        that moved since the last batch's), each partition's mark there written with
        ``batch``."""
        stored = self._database.offsets()
        marks = self._buffer.applied_marks()
        moved: dict[Position, int] = {}
        given_marks = self._given_marks
        self._errands.read_from(stored)
        for position, offset in self._buffer.applied_positions().items():
            mark = marks.get(position)  # (``None``: a child waiting for its base)
            if offset > max(self._given.get(position, -1), stored.get(position, -1)):
                moved[position] = self._given[position] = offset
            elif mark is None or given_marks.get(position, mark) == mark:
                continue  # (a child's base found: its mark at its offset is written then)
            if mark is None:
                given_marks[position] = NO_FLOOR - 1
                continue
            batch.set_progress(ORDER_SCOPE, position[0], position[1], mark)
            given_marks[position] = mark
        self._bases.write(batch)
        return moved

    def rewind(self) -> dict[Position, int]:
        """The batches not committed were dropped: read every partition again from the state's
        offset with its stored mark (the records the buffer held too); returns where each
        partition is to be read from (a partition without a state offset and nothing read:
        left as it is)."""
        offsets, marks = self._database.offsets(), order_marks(self._database)
        starts: dict[Position, int] = {}
        positions = sorted(self._next)  # (a growth child after its parent: its lineage)
        for position in positions:
            start = offsets.get(position, self._first.get(position))
            self._buffer.forget(position)
            del self._next[position]
            self._first.pop(position, None)
            self._bases.forget(position)
            if start is not None:
                starts[position] = start
        self._bases.rewound()
        for position in positions:
            self._assign(position, offsets.get(position), marks.get(position))
        link_survivors(self._buffer, self._inputs(), self._next, offsets, marks)
        self._close_drained()
        self._bases.resolve()
        self.dropped()
        self._errands.read_from(starts)
        return starts

    # -- the bounded wait -------------------------------------------------------------------

    def forcing_due(self, flowing: set[Position]) -> bool:
        """Whether a forced tick is due now (nothing is decided or changed)."""
        return bool(self._due(flowing, self._clock.monotonic()))

    def forced_ticks(self, flowing: set[Position]) -> list[Tick]:
        """The forced ticks to write now, with the batch being prepared: one to each partition
        of ``flowing`` (read, no gate holding it; none a shrink deleted) that blocked the
        least head for ``max_input_wait``, floor the mark that releases it."""
        now = self._clock.monotonic()
        wall = int(self._clock.time() * 1000)
        ticks: list[Tick] = []
        for position, floor in self._due(flowing, now):
            topic, partition = position
            entry = self._inputs().get(topic)
            compacted = entry is not None and entry.compacted
            key = tick_key(topic, uuid.uuid4().hex) if compacted else None
            steps = self._steps.known_steps(topic)
            ticks.append(Tick(topic, partition, floor, wall, key, steps))
            self._forced[position] = floor
            self._errands.decided(position, floor)
            self.forced += 1
            log.info(
                "%s[%d] blocked the next record for %.1f s: a tick with floor %d lets it go",
                topic,
                partition,
                now - self._blocked_since[position],
                floor,
            )
        return ticks

    def not_written(self, tick: Tick) -> None:
        """``tick``, decided here, was left out (its partition unknown to the producer yet):
        decided again when due."""
        position = (tick.topic, tick.partition)
        if self._forced.get(position) == tick.floor:
            del self._forced[position]
        self._errands.left_out(position, tick.floor)

    def dropped(self) -> None:
        """A batch that applied nothing held here was dropped: its forced ticks may not have
        been written (decided again when due) and its offsets not committed (given again)."""
        self._forced.clear()
        self._errands.dropped()
        self._given.clear()
        self._given_marks.clear()
        self._bases.dropped()

    # -- internals --------------------------------------------------------------------------

    def _due(self, flowing: set[Position], now: float) -> list[tuple[Position, int]]:
        """The partitions of ``flowing`` due a forced tick now, with its floor; a blocking
        partition's timer runs from when it began to block after its last record (this only
        starts timers: nothing is decided)."""
        blockers = self._blockers(now)
        since, inputs = self._blocked_since, self._inputs()
        return [
            (position, needs)
            for position, needs in sorted(blockers.items())
            if position in flowing
            and (position[0] not in inputs or position[1] < inputs[position[0]].partitions)
            and self._forced.get(position, NO_FLOOR - 1) < needs
            and now - since[position] >= self._wait
        ]

    def _blockers(self, now: float) -> dict[Position, int]:
        """The partitions that block the least item something waits for (a record, a tick
        not forced here: ``MergeBuffer.waited_for``; not an errand before it), each with the
        floor that releases it; the wait of each that begins to block starts ``now``."""
        blocking = self._buffer.waited_for()
        if blocking is None:
            self._blocked_since.clear()  # (a record read later waits its whole wait)
            return {}
        blockers = {b.position: b.needs for b in blocking.blockers}
        for position in blockers:
            self._blocked_since.setdefault(position, now)
        return blockers

    def _close_drained(self) -> None:
        """Close the deleted partitions read past their drain markers (``close_drained``)."""
        close_drained(self._buffer, self._inputs(), self._next, self._closed)

    def _assign(self, position: Position, offset: int | None, mark: int | None) -> None:
        """Read ``position`` from the state's ``offset`` with its stored ``mark`` there (a
        growth child from its life's start: ``ChildBases.assign``)."""
        start = 0 if offset is None else offset
        stored = None if offset is None else mark
        entry = self._inputs().get(position[0])
        rank = 0 if entry is None else entry.history.rank(position[1], start)
        if not self._bases.assign(entry, position, start, rank=rank, reading=self._next):
            self._buffer.assign(position, start, NO_FLOOR if stored is None else stored, rank)
        self._next[position] = start
        self._closed.discard(position)

    def _forget(self, position: Position) -> None:
        self._buffer.forget(position)
        for kept in (self._next, self._first, self._given, self._blocked_since, self._forced):
            kept.pop(position, None)
        self._errands.forget(position)
        self._closed.discard(position)
        self._bases.forget(position)
        self._given_marks.pop(position, None)


def input_order_of(
    records: RecordProcessor,
    database: ProcessorDatabase,
    clock: Clock,
    reading: Assignment,
    bases: GrowthBases | None,
) -> InputOrder | None:
    """The canonical order of the inputs ``reading`` reads for ``records``' app (``None``:
    the app applies records as read), growth bases recorded in ``bases``."""
    if not ordered(records.app):
        return None
    inputs = lambda: reading.layout.inputs  # noqa: E731
    return InputOrder(
        records.app, database, clock, steps=records.placement, inputs=inputs, bases=bases
    )
