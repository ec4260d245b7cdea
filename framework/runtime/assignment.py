"""Which input partitions a processor reads, and from which offset.

The loop owns one ``Assignment`` per run. It is told what the processor owns (the handoff
coordinator answers that from the control log) and makes the consumer read exactly that --
every partition of the input topics' universe (``TopicHistory.created``: deleted partitions
too) it owns -- each from the state's offset, rebuilding without output what the group
processed but a lost state directory lacks (``restore_below``), and never reading past records
retention deleted. Records an ordering gate holds stop their partition there (``cut``,
``framework.runtime.holds``), checked again every half second. It also holds the input
topics' current layout (``adopt`` takes a growth or a shrink from the registry).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import replace

from framework.clock import Clock
from framework.coordination.layout import AppLayout
from framework.coordination.registry import TopicEntry
from framework.growth.gates import PositionOf
from framework.kafka import KafkaConsumer
from framework.runtime.holds import Holds, Taken
from framework.runtime.recovery import check_rebuildable
from framework.runtime.retention import check_retained
from rebalance import TopicHistory
from rebalance.positions import Position
from statestore import ProcessorDatabase

__all__ = ["Assignment"]

# the processor's lines keep the loop's logger name (they were written there)
log = logging.getLogger("framework.runtime.loop")
_GATE_SECONDS = 0.5


class Assignment:
    """The partitions processor ``processor`` reads with ``consumer``, and from where
    (``clock``, the run's, spaces out the checks of ordering gates)."""

    def __init__(
        self,
        processor: int,
        consumer: KafkaConsumer,
        database: ProcessorDatabase,
        layout: AppLayout,
        clock: Clock,
    ) -> None:
        self.processor = processor
        self._clock = clock
        #: the state directory is new (or was lost) and not checked yet, even by an earlier
        #: run killed first: the partitions owned when this run begins (gated or not) are
        #: checked at once for keys whose history another processor reads; partitions
        #: gained later come from a scale's catch-up, which builds them
        self._fresh = database.fresh
        self.layout = layout
        #: the partitions the consumer reads
        self.owned: set[Position] = set()
        #: partitions being rebuilt without output, up to the group's committed offset
        self.restore_below: dict[Position, int] = {}
        #: the partitions of ``restore_below`` not yet seen rebuilt to their bound
        self._rebuilding: set[Position] = set()
        self._consumer = consumer
        self._database = database
        #: the partitions held at a record an ordering gate holds back
        self.holds = Holds(processor, consumer, _histories(layout))
        self._gates_checked = 0.0
        #: the group's committed offsets of input partitions this processor does not read,
        #: for gates (read again when older than ``_GATE_SECONDS``), and when read
        self._group: dict[Position, int] = {}
        self._group_read = float("-inf")

    @property
    def counts(self) -> dict[str, int]:
        """Each input topic's partition count."""
        return {name: entry.partitions for name, entry in self.layout.inputs.items()}

    def adopt(self, entries: Mapping[str, TopicEntry]) -> None:
        """Take the registry's current view of the input topics (a growth or a shrink, their
        markers)."""
        before = self.counts
        self.layout = replace(
            self.layout,
            inputs={name: entries.get(name, e) for name, e in self.layout.inputs.items()},
        )
        self.holds.gates.adopt(_histories(self.layout))
        for name, count in self.counts.items():
            if count != before.get(name):
                log.info(
                    "processor %d: input %s now places keys with %d partitions (was %d); keys "
                    "stay on their processors",
                    self.processor,
                    name,
                    count,
                    before.get(name, 0),
                )

    @property
    def blocked(self) -> dict[Position, str]:
        """The partitions held at a record, with the reason."""
        return self.holds.reasons(self._position())

    @property
    def flowing(self) -> set[Position]:
        """The partitions read that no gate holds (what the consumer got past in them was
        delivered: ``PassOver`` may follow it)."""
        return self.owned - self.holds.held.keys()

    def gates_due(self) -> bool:
        """Whether partitions are held and the gates were last checked a while ago."""
        return (
            bool(self.holds.held) and self._clock.monotonic() - self._gates_checked > _GATE_SECONDS
        )

    def checked(self, owned: set[Position]) -> set[Position]:
        """``owned``, once a new (or lost) state directory was checked (``_check_fresh``);
        reads on the held partitions whose gates opened (no batch may be in flight)."""
        self._gates_checked = self._clock.monotonic()
        if self._fresh:
            self._check_fresh(owned)
        if self.holds.held:
            self.holds.recheck(self._position())
        return owned

    def cut(self, records: list[Taken]) -> list[Taken]:
        """``records`` (a batch) less the held ones (``Holds.cut``)."""
        return self.holds.cut(records, self._position())

    def rewound(self, positions: Iterable[Position]) -> None:
        """The consumer was sent back to records before a held one in ``positions``."""
        self.holds.release(positions)

    def _position(self) -> PositionOf:
        """Where each input partition is read up to, for gates: this processor's next
        offset of a partition it reads (its state's: what is applied), else the group's
        committed offset."""
        offsets: dict[Position, int] | None = None

        def position(where: Position) -> int | None:
            nonlocal offsets
            if where in self.owned:
                if offsets is None:
                    offsets = self._database.offsets()
                return offsets.get(where)
            now = self._clock.monotonic()
            if now - self._group_read > _GATE_SECONDS:
                others = [p for p in self.layout.input_positions() if p not in self.owned]
                self._group = self._consumer.committed(others)
                self._group_read = now
            return self._group.get(where)

        return position

    def _check_fresh(self, owned: set[Position]) -> None:
        """A new (or lost) state directory holds nothing: refuse to start if a partition it
        owns has keys whose earlier records another processor reads (the state built for
        them elsewhere is what was lost); then note that the directory was checked."""
        offsets = self._database.offsets()
        for position in sorted(owned):
            if offsets.get(position) is None:
                self._check_rebuildable(position, owned, None)
        self._database.checked_fresh()
        self._fresh = False

    def _check_rebuildable(
        self, position: Position, owned: set[Position], start: int | None
    ) -> None:
        check_rebuildable(
            self.processor,
            position,
            owned,
            start,
            inputs=self.layout.inputs,
            state_dir=self._database.path,
        )

    def rebuilding(self) -> bool:
        """Whether an owned partition is still being rebuilt up to the group's offset.

        A receiver's catch-up waits for that: the rebuild applies the records of every key
        this processor owns, and a handoff completing while it runs would make the keys the
        catch-up rebuilt from the same ancestor partition "owned", and applied twice.
        """
        if not self._rebuilding:
            return False
        offsets = self._database.offsets()
        self._rebuilding = {
            p
            for p in self._rebuilding
            if p in self.owned and (offsets.get(p) or 0) < self.restore_below[p]
        }
        return bool(self._rebuilding)

    def assign(self, owned: set[Position]) -> None:
        """Make the consumer read exactly ``owned``, each from the state's offset."""
        added, removed = owned - self.owned, self.owned - owned
        if removed:
            self._consumer.remove(removed)
            self.holds.forget(removed)
        if added:
            state_offsets = self._database.offsets()
            committed = self._consumer.committed(added)
            # stop rather than let the consumer skip records retention deleted unread
            firsts = check_retained(
                self.processor,
                self._consumer,
                {p: (state_offsets.get(p), committed.get(p)) for p in added},
                grown={
                    (name, p)
                    for name, entry in self.layout.inputs.items()
                    for p in range(entry.initial_partitions, entry.history.created)
                },
            )
            starts: dict[Position, int | None] = {}  # explicit: see check_retained
            behind: dict[Position, int] = {}
            for position in added:
                start = state_offsets.get(position)
                group = committed.get(position)
                if group is not None and group > (start or 0):
                    # The group processed records this state lacks (a lost state directory):
                    # rebuild them without repeating their outputs.
                    self._check_rebuildable(position, owned, start)
                    self.restore_below[position] = group
                    self._rebuilding.add(position)
                    log.warning(
                        "processor %d: rebuilding %s[%d] up to %d without output",
                        self.processor,
                        *position,
                        group,
                    )
                elif start is not None and (group is None or group < start):
                    # state built elsewhere (a backfill, a catch-up): the group's offset is T1
                    # for catch-ups reading this partition, so it says what the state holds
                    behind[position] = start
                starts[position] = firsts[position]
            if behind:
                self._consumer.commit(behind)
            self._consumer.add(starts)
        self.owned = set(owned)


def _histories(layout: AppLayout) -> dict[str, TopicHistory]:
    return {name: entry.history for name, entry in layout.inputs.items()}
