"""The receiving side of the catch-up protocol (KIP-287): build the gained keys' state.

A processor that gains partitions in a scale reads S2 (its S1 partitions plus every partition
that held their keys' earlier records -- ancestors, and deleted partitions whose keys merged
into them -- each up to the marker after which it holds none of them: ``key_history``) from
T2 (its own progress: the beginning, or where a bulk build left off -- its sources'
snapshots, or a Spark job -- in which case a record of a key gained from source ``s`` is
applied only at or past what ``s``'s snapshot covers), keeps the records of the keys it
*gains* -- keys it owns at P' whose owner at P is one of its sources still handing over
(``bucket(key_hash, B, P') == J`` and ``bucket(key_hash, B, P)`` in those sources) and the
ticks, and applies them in restore mode (no outputs, no dead letters; a tick to those keys
only). Keys it owned before (a scale-in's receiver reads its own partitions as ancestors) and
keys of a handoff it already completed (and now processes live) are never applied again.

It never applies a record past T1 (the group's committed offset; no snapshot covers more), so
it applies nothing the owner has not emitted; records read past T1 wait in a ``ReadAhead``.
Released at F, a partition is applied exactly up to F (a position past F stops it, but under
at-least-once: ``check_not_past``). It first deletes any state it holds for the gained keys
(left from an earlier membership): gained keys are always rebuilt from empty. An app in the
canonical input order applies what it reads in that order (``catchup_order``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from functools import partial
from itertools import chain

from framework.input_times import ordered
from framework.kafka import ConsumerFailedError, Kafka, Message, OffsetResetError
from framework.processing import RecordProcessor
from framework.runtime.catchup_apply import (
    Applies,
    BulkBuild,
    Taken,
    apply_taken,
    cannot_read_on,
    check_not_past,
    clear_stale,
    gained_from,
    progress_writer,
)
from framework.runtime.catchup_order import CatchUpOrder
from framework.runtime.catchup_reach import ancestors_read, read_for_gates
from framework.runtime.completions import complete_offsets, holds_flag
from framework.runtime.crashes import CrashGuard
from framework.runtime.passed_over import passed_within
from framework.runtime.read_ahead import PausedReads, ReadAhead
from framework.runtime.retention import check_catch_up_history
from framework.snapshots.source_starts import source_starts
from rebalance import HandoffPhase, TopicHistory
from rebalance.control import Handoff, Scale
from rebalance.key_ranges import KeyRange, handoff_ranges
from rebalance.plan import read_set
from rebalance.positions import Position
from statestore import ProcessorDatabase
from statestore.layout import CRASH_CATCHUP_ATTEMPT_PREFIX

__all__ = ["BootstrapStarter", "CatchUp"]

log = logging.getLogger(__name__)

#: Starts building the gained keys' state in bulk (Spark, or the sources' snapshots) for a
#: catch-up that has none yet; ``None``: replay instead.
BootstrapStarter = Callable[["CatchUp"], "BulkBuild | None"]
_REFRESH_SECONDS = 0.5
_CLOSED = (HandoffPhase.COMPLETE, HandoffPhase.ABORTED)
#: how far each partition may be applied (``None``: no limit)
Limits = dict[Position, int | None]


class CatchUp:
    """Rebuilds processor ``processor``'s gained keys for one scale generation."""

    def __init__(
        self,
        processor: int,
        initial_processors: int,
        scale: Scale,
        *,
        kafka: Kafka,
        group_id: str,
        database: ProcessorDatabase,
        records: RecordProcessor,
        bootstrap: BootstrapStarter | None = None,
        histories: Mapping[str, TopicHistory] | None = None,
        crash_limit: int = 3,
        read_ahead: int = 5000,
        at_least_once: bool = False,
    ) -> None:
        self.processor = processor
        self.generation = scale.generation
        self.scope = f"catchup-{scale.generation}"
        self._loaded_flag = f"{self.scope}-bootstrapped"  # set once a bulk build is in
        # only handoffs still open: a completed one's partitions are processed live already
        pending = [h for h in scale.incoming(processor) if h.phase not in _CLOSED]
        self.sources = frozenset(h.source for h in pending)
        self.s1: set[Position] = {p for h in pending for p in h.partitions}
        #: the input topics' partition histories (their steps, lives and gates)
        self.topics = topics = {**(histories or {}), **scale.histories}
        self.bounds: dict[Position, int | None] = {
            (read.topic, read.partition): read.end_offset
            for read in read_set(topics, sorted(self.s1))
        }
        self._database = database
        self._records = records
        b, sources = initial_processors, self.sources
        old, new = scale.old_processors, scale.new_processors
        #: the source a key is gained from (``None``: not gained)
        self.gained_from = gained_from(b, old, new, processor, sources)
        #: per source, the ranges of stored keys gained from it
        self.gained_ranges: dict[int, list[KeyRange]] = {
            s: handoff_ranges(b, old, new, processor, [s]) for s in sorted(sources)
        }
        clear_stale(database, self.scope, b, handoff_ranges(b, old, new, processor, sources))
        # records deleted under the reader must stop it, not make it skip or jump
        self._consumer = kafka.consumer(group_id, reset="error", name="catch-up consumer")
        progress = database.progress(self.scope)
        self.positions: dict[Position, int] = {p: progress.get(p, 0) for p in self.bounds}
        #: where released partitions are taken over (F, or where it rebuilt to, under
        #: at-least-once: ``check_not_past``)
        self._takeover = partial(
            check_not_past, processor, self.generation, self.positions, at_least_once=at_least_once
        )
        attempts = CRASH_CATCHUP_ATTEMPT_PREFIX + self.scope.encode()
        self._guard = CrashGuard(
            database, crash_limit, processor, clock=kafka.clock, attempt_key=attempts,
            offsets=self.positions,
        )  # fmt: skip
        self.t1: dict[Position, int] = {}
        self.released: dict[Position, int] = {}
        self._paused = PausedReads(self._consumer)  # see ``_read_ahead``
        #: records read past how far they may be applied yet (T1, or F): ``read_ahead`` in all
        self._ahead = ReadAhead(read_ahead // max(1, len(self.bounds)))
        self._refreshed = 0.0
        self.applied = 0
        self.replayed = 0
        self.bootstrapped = 0
        self._clock = kafka.clock
        self.started = self._clock.monotonic()
        self.bootstrap: BulkBuild | None = None
        self._bootstrap_polled = 0.0
        starts = source_starts(database, self.scope, self.sources)
        #: what applies here: gained keys' records from where their source's snapshot ends
        self._applies = Applies(self.gained_from, starts, time=records.app.uses_time)
        #: the canonical order of what it reads (``None``: applied as read)
        self._order = (
            CatchUpOrder(records.app, topics, self.scope) if ordered(records.app) else None
        )
        if bootstrap is not None and not progress and not database.has_flag(self._loaded_flag):
            self.bootstrap = bootstrap(self)
            if self.bootstrap is not None:
                log.info(
                    "processor %d: building the keys it gains in generation %d in bulk (%s); "
                    "catch-up follows",
                    processor,
                    self.generation,
                    self.bootstrap.describe(),
                )
        if self.bootstrap is None:
            self._start_reading(progress)

    @property
    def bootstrapping(self) -> bool:
        """Whether the bulk build (Spark, or snapshots) still runs (nothing is read meanwhile)."""
        return self.bootstrap is not None

    def _poll_bootstrap(self) -> None:
        """Step the bulk build; once it is in, read on from what it covered."""
        assert self.bootstrap is not None
        now = self._clock.monotonic()
        if self.bootstrap.polled_every and now - self._bootstrap_polled < _REFRESH_SECONDS:
            return
        self._bootstrap_polled = now
        records = self.bootstrap.poll()
        if records is None:
            return
        self.bootstrap = None
        self.bootstrapped = records
        self._applies.starts = source_starts(self._database, self.scope, self.sources)
        self._start_reading(self._database.progress(self.scope))
        # a release read before the bulk build ended was checked against positions of 0
        self.released = self._takeover(self.released)

    def _start_reading(self, progress: Mapping[Position, int]) -> None:
        """Refuse when Kafka lost history still needed from ``progress`` on (see
        ``check_catch_up_history``); else start reading there."""
        starts = {position: progress.get(position, 0) for position in self.bounds}
        if self._order is not None:  # (from below where a mark is not known: for marks only)
            starts = self._order.start(starts, self._database, self.bounds)
        needed = check_catch_up_history(
            self._consumer,
            self.processor,
            self.generation,
            {p: (starts[p], None if p in self.s1 else b) for p, b in self.bounds.items()},
        )
        self.positions.update(starts)
        # from an explicit offset, never "the beginning": retention deleting records between
        # the check above and the first fetch must stop the reader, not move it past them
        self._consumer.assign(needed)
        self.refresh(force=True)
        log.info(
            "processor %d: catching up for generation %d: S1 %s, S2 %s, from %s",
            self.processor,
            self.generation,
            sorted(self.s1),
            sorted(self.bounds),
            self.positions,
        )

    def release(self, handoff: Handoff) -> None:
        """The old owner released ``handoff``'s partitions at F: read them exactly to F
        (or take them over where it rebuilt to, past F: see ``check_not_past``, which raises
        ``ProcessorStoppedError`` when that is a protocol error)."""
        takeover = self._takeover(handoff.released)
        self.released.update(takeover)
        for position, final in takeover.items():
            self._ahead.forget(position, final)  # never applied here
        self._resume_ready()

    def limit(self, position: Position, *, gated: bool = True) -> int | None:
        """How far ``position`` may be read now (``None``: no limit).

        S1 partitions: T1 (the group's committed offset), or F once released. Ancestors: their
        bound, and never past T1 (their owner's commits) either, so no record is applied
        here before its owner emitted it. With ``gated``, never past a gate that is not open
        (``TopicHistory.read_limit``: a growth's new life waits for its parent's marker, a
        survivor for its deleted partitions' drain markers; holding the whole partition is
        exact here, where no output waits)."""
        if position in self.released:
            allowed: int | None = self.released[position]
        else:
            committed = self.t1.get(position, self.positions[position])
            bound = None if position in self.s1 else self.bounds.get(position)
            allowed = committed if bound is None else min(bound, committed)
        if not gated:
            return allowed
        topic, partition = position
        ends = {**{p: b for p, b in self.bounds.items() if p not in self.s1}, **self.released}
        read = read_for_gates(self.topics[topic], topic, self.positions, ends)
        gate = self.topics[topic].read_limit(partition, read)
        if gate is None or (allowed is not None and allowed <= gate):
            return allowed
        return max(gate, self.positions[position])  # (a gate below it: read past it already)

    def refresh(self, force: bool = False) -> None:
        """Re-read T1 (the group's committed offsets of what is read) every half second."""
        now = self._clock.monotonic()
        if not force and now - self._refreshed < _REFRESH_SECONDS:
            return
        self._refreshed = now
        pending = [
            position
            for position, bound in self.bounds.items()
            if position not in self.released
            and (position in self.s1 or bound is None or self.positions[position] < bound)
        ]
        if pending:
            self.t1.update(self._consumer.committed(pending))
        self._resume_ready()

    def _resume_ready(self) -> None:
        self._paused.resume_ready(self._ahead, self.limit, self.positions)

    def step(self, max_records: int, timeout: float = 0.05) -> int:
        """Apply up to ``max_records`` records (read ahead earlier when the limits now allow
        them, else read now); returns how many were applied or passed over."""
        if self.bootstrap is not None:
            self._poll_bootstrap()
            return 0
        self.refresh()
        if self._order is not None:  # (each partition is applied up to its end: T1, F, bound)
            self._order.ends({p: self.limit(p, gated=False) for p in self.bounds})
        if self._guard.careful(set(self.bounds)):
            max_records = 1  # one record per step while records that killed it are suspect
        due = self._ahead.due(self.limit, max_records)  # read ahead before, allowed now
        room = max_records - len(due)
        fresh = self._consume(room, 0.0 if due else timeout) if room > 0 else []
        taken: list[Taken] = []
        moved: dict[Position, int] = {}
        limits: Limits = {}  # as at the step's start (they hold for all of it)
        read = 0  # (records read: taken, or added to the order)
        for index, message in enumerate(chain(due, fresh)):
            topic, partition, offset = message.topic(), message.partition(), message.offset()
            if topic is None or partition is None or offset is None:
                continue
            position = (topic, partition)
            if offset < self.positions[position]:
                continue
            if index >= len(due) and self._read_ahead(position, message, offset, limits):
                continue
            applies = self._applies.record(message, position, offset)
            if self._order is not None:
                self._order.add(message, position, offset, applies)
            else:
                taken.append((message, position, offset, applies))
            read += 1
            self.positions[position] = offset + 1
            moved[position] = offset + 1
        firsts = {**self._paused.beyond, **self._ahead.firsts()}  # (records it kept or passed)
        held = self._paused.holds(self._ahead)
        passed = passed_within(self._consumer, self.positions, self.limit, held, firsts)
        self.positions.update(passed)
        moved.update(passed)
        write = progress_writer(self.scope, moved)
        if self._order is not None:  # (applied: what it releases; committed: what it applied)
            taken, write = self._order.step(passed, moved, max_records)
        if moved or taken:
            database, records, guard = self._database, self._records, self._guard
            self.applied += apply_taken(
                taken, database=database, records=records, guard=guard, write=write,
                applies=self._applies,
            )  # fmt: skip
            self.replayed += read
            self._guard.committed(moved)
        self._resume_ready()
        return read

    def _read_ahead(self, position: Position, message: Message, at: int, limits: Limits) -> bool:
        """Keep ``message`` (at offset ``at``) when ``position`` may not be applied that far
        yet (or keeps records already); pause the partition when it keeps enough, or when
        the record will never be applied."""
        if position in self._paused:
            return True  # dropped: read again from the catch-up's position on resuming
        if position not in limits:
            limits[position] = self.limit(position)
        limit = limits[position]
        if not self._ahead.holding(position) and (limit is None or at < limit):
            return False
        final = position in self.released or self.bounds.get(position, -1) == limit
        past = final and limit is not None and at >= limit  # past F or the bound: never applied
        if past or not self._ahead.hold(position, message, at):
            self._paused.pause(position, at if past and not self._ahead.holding(position) else None)
        return True

    def _consume(self, max_records: int, timeout: float) -> list[Message]:
        try:
            return self._consumer.consume(max_records, timeout)
        except (OffsetResetError, ConsumerFailedError) as error:  # the catch-up stops only
            raise cannot_read_on(self.processor, self.generation, error) from None

    def lag(self) -> dict[Position, int]:
        """T1 - T2 per S1 partition (F - T2 once released)."""
        return {
            position: max(0, (self.limit(position, gated=False) or 0) - self.positions[position])
            for position in sorted(self.s1)
        }

    def caught_up(self, handoff: Handoff, max_lag: int) -> bool:
        """Whether ``handoff``'s partitions (and every bounded ancestor) are within ``max_lag``."""
        if self.bootstrap is not None:
            return False
        ancestors_done = all(
            self.positions[p] >= bound
            for p, bound in self.bounds.items()
            if p not in self.s1 and bound is not None
        )
        lag = self.lag()
        return (
            ancestors_done
            and ancestors_read(self.topics, self.positions, handoff)
            and all(lag[p] <= max_lag for p in handoff.partitions)
        )

    def finished(self, handoff: Handoff) -> bool:
        """Whether every partition of a released ``handoff`` was read exactly to F (and its
        ancestors to their thresholds)."""
        return (
            self.bootstrap is None
            and (self._order is None or not self._order.waiting())
            and all(
                p in self.released and self.positions[p] == self.released[p]
                for p in handoff.partitions
            )
            and ancestors_read(self.topics, self.positions, handoff)
        )

    def complete(self, handoff: Handoff) -> None:
        """Make ``handoff``'s partitions input partitions of this processor, from F. The
        catch-up progress stays at F, so a crash before COMPLETE reaches the control log
        finds the catch-up finished and completes again instead of replaying (a canonical
        app's stale marks go)."""
        batch = self._database.begin()
        finals = {p: self.released[p] for p in handoff.partitions}
        marks = None if self._order is None else self._database.progress(self._order.mark_scope)
        complete_offsets(self._database, batch, finals, marks=marks)
        batch.set_flag(holds_flag(self.generation, handoff.source))  # completed *here*
        batch.commit()
        for position in handoff.partitions:
            self.s1.discard(position)
            self._ahead.forget(position)
            self._paused.pause(position)

    def close(self) -> None:
        """Stop reading (and a bulk build still running)."""
        self._ahead.clear()
        if self.bootstrap is not None:
            self.bootstrap.cancel()
        self._consumer.close()
