"""The placement check of every keyed input record, before anything runs
(``framework.growth.placement`` says what is placed), and the counts of the records without
the ``splitstate.count`` header it passed (``UNFENCED_SCOPE``) and refused
(``UNPLACED_SCOPE``), kept in the state batches so that they stand only once a batch commits.

``RecordProcessor`` runs it on every path that folds records into state -- the live loop,
restore mode, a receiver's catch-up, the Spark fold -- so each judges a record the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import mmh3

from framework.coordination.registry import Growth, TopicEntry
from framework.growth.markers import marker_fence, marker_growth, unrecorded_marker
from framework.growth.placement import (
    UNFENCED_SCOPE,
    UNPLACED_SCOPE,
    Fence,
    Layouts,
    NoCountHeader,
    count_header,
    fences_of,
    history_layouts,
    late_fence,
    late_reason,
    misplaced_reason,
    placed_by,
    unplaced_reason,
)
from rebalance import TopicHistory
from statestore import BatchStatus, StateBatch

__all__ = ["PlacementCheck", "RegistryView"]

Position = tuple[str, int]


class RegistryView(Protocol):
    """The topic registry's entries as read (``TopicRegistry.read``'s ``RegistryEntries``, or
    a ``dict``): the entry of a topic, ``None`` when it is not registered (the registry's
    raises ``RegistryRecordError`` when its last record cannot be read)."""

    def get(self, topic: str, /) -> TopicEntry | None:
        """The entry of ``topic``."""


#: batches whose counts stand (a sealed batch commits, or every later one is dropped too)
_KEPT = (BatchStatus.COMMITTED, BatchStatus.SEALED)


class PlacementCheck:
    """Whether keyed records sit where linear hashing places their keys.

    ``initial_partitions``: each input topic's initial partition count ``N`` (the topic
    registry's; topics it lacks are not checked). ``histories``: each input topic's partition
    history (counts and thresholds, the registry's, kept current with ``adopt``; just ``N``
    for a topic without one): without the header, any of its counts places a key; with the
    growth markers met in the input, its thresholds say which records landed after their
    growth's fence. ``unfenced``/``unplaced``: the counts the processor's state holds.
    ``growths``: the input topics' growths in progress (the registry's). A growth marker met
    in the input fences its partition only if these record its growth (``marker``).
    """

    def __init__(
        self,
        initial_partitions: Mapping[str, int],
        histories: Mapping[str, TopicHistory],
        unfenced: Mapping[Position, int],
        unplaced: Mapping[Position, int],
        growths: Mapping[str, Growth] | None = None,
    ) -> None:
        self.initial_partitions = dict(initial_partitions)
        #: each input topic's partition counts (its history's) and their layouts
        self._counts: dict[str, tuple[int, ...]] = {}
        self._layouts: dict[str, Layouts] = {}
        for name, initial in self.initial_partitions.items():
            self._counts[name] = (initial,)
            self._layouts[name] = history_layouts((initial,))
        #: each input partition's growth fences, by child: the registry's and markers met
        self._fences: dict[Position, dict[int, Fence]] = {}
        #: each input topic's history and growth in progress, as last read from the registry:
        #: what growth markers are checked against
        self._registry: dict[str, tuple[TopicHistory, Growth | None]] = {}
        self.adopt(histories, growths)
        self._counted: dict[str, dict[Position, int]] = {}
        self._counting: StateBatch | None = None  # the batch ``_pending`` counts belong to
        self._pending: dict[tuple[str, Position], int] = {}  # by (scope, position)
        self.recount(unfenced, unplaced)

    def adopt(
        self, histories: Mapping[str, TopicHistory], growths: Mapping[str, Growth] | None = None
    ) -> None:
        """Take the input topics' current histories (a growth recorded its count, then its
        thresholds) and their growths in progress (``growths``), both the registry's."""
        for topic, history in histories.items():
            self._registry[topic] = (history, (growths or {}).get(topic))
            self._counts[topic] = history.counts
            self._layouts[topic] = history_layouts(history.counts)
            for partition, fences in fences_of(history).items():
                known = self._fences.setdefault((topic, partition), {})
                known.update((fence[0], fence) for fence in fences)

    def confirm(self, entries: RegistryView) -> None:
        """Check growth markers against ``entries`` (the topic registry's, read after the
        markers were: ``RecordProcessor.confirm_markers``) from now on. Only the input
        topics' entries are read: another app's that cannot be read is never met."""
        for topic in self.initial_partitions:
            entry = entries.get(topic)
            if entry is not None:
                self._registry[topic] = (entry.history, entry.growth)

    def unrecorded(self, where: tuple[str, int, int], headers: Any) -> str | None:
        """Why the growth marker at ``where`` (topic, partition, offset) is not one the
        registry (as this check knows it) records; ``None`` if it is."""
        history, growth = self._registry.get(where[0], (None, None))
        return unrecorded_marker(where, headers, history, growth)

    def marker(self, where: tuple[str, int, int], headers: Any) -> str | None:
        """A growth marker met at ``where``: if the registry records its growth, its child's
        keys end at the registry's threshold or, before the registry records one, here (the
        first marker of a child is its threshold); otherwise why it fences nothing (a dead
        letter)."""
        refused = self.unrecorded(where, headers)
        if refused is None:
            topic, partition, _offset = where
            name = marker_growth(topic, headers)
            assert name is not None  # a recorded marker names its step
            if not name.drain:  # (a drain marker fences no child)
                fences = self._fences.setdefault((topic, partition), {})
                history, _growth = self._registry[topic]
                fences.setdefault(name.partition, marker_fence(where, name, history))
        return refused

    def recount(self, unfenced: Mapping[Position, int], unplaced: Mapping[Position, int]) -> None:
        """Count from ``unfenced`` and ``unplaced`` again (the state's, after uncommitted
        batches were dropped)."""
        self._counted = {UNFENCED_SCOPE: dict(unfenced), UNPLACED_SCOPE: dict(unplaced)}
        self._counting, self._pending = None, {}

    def counts(self, scope: str) -> dict[Position, int]:
        """The records counted in ``scope`` (``UNFENCED_SCOPE``, ``UNPLACED_SCOPE``) per input
        partition, by committed batches."""
        if self._counting is not None and self._counting.status is BatchStatus.COMMITTED:
            self._keep_pending()
        return dict(self._counted.get(scope, {}))

    def check(
        self,
        batch: StateBatch,
        headers: Any,
        key: bytes,
        where: tuple[str, int, int],
        *,
        restore: bool,
    ) -> str | None:
        """Why the record at ``where``, with ``headers``, is not processed (stage
        ``placement``): not where its count header places its key (without the header:
        where no count of the topic's history does), or landed after its growth's fence;
        ``None`` if it is processed.
        Records without the header are counted in ``batch`` (unless restored)."""
        topic, partition, offset = where
        initial = self.initial_partitions.get(topic)
        if initial is None:
            return None
        h = mmh3.hash(key, 0, False)  # key_hash(key), inlined: once, for every check below
        placed = count_header(headers)
        if isinstance(placed, NoCountHeader):
            return self._check_unheaded(batch, h, key, where, restore=restore)
        reason = misplaced_reason(h, key, (topic, partition), initial, placed)
        if reason is None:
            fences = self._fences.get((topic, partition))
            fence = late_fence(h, offset, initial, fences.values()) if fences else None
            if fence is not None:
                reason = late_reason(key, where, fence, header=True)
        return reason

    def _check_unheaded(
        self, batch: StateBatch, h: int, key: bytes, where: tuple[str, int, int], *, restore: bool
    ) -> str | None:
        """``check`` of a record without the count header, whose key's ``key_hash`` is
        ``h``: counted (unless restored) as processed or dead-lettered."""
        topic, partition, offset = where
        position = (topic, partition)
        reason = None
        if not placed_by(h, partition, self._layouts[topic]):
            reason = unplaced_reason(h, key, topic, partition, self._counts[topic])
        else:
            fences = self._fences.get(position)
            if fences:
                fence = late_fence(h, offset, self._counts[topic][0], fences.values())
                if fence is not None:
                    reason = late_reason(key, where, fence, header=False)
        if not restore:
            self._count(batch, UNFENCED_SCOPE if reason is None else UNPLACED_SCOPE, position)
        return reason

    def _count(self, batch: StateBatch, scope: str, position: Position) -> None:
        """Count a record in ``scope``, in ``batch`` (kept once it commits)."""
        if batch is not self._counting:
            if self._counting is not None and self._counting.status in _KEPT:
                self._keep_pending()
            self._counting, self._pending = batch, {}
        counted = (scope, position)
        count = self._pending.get(counted, self._counted[scope].get(position, 0)) + 1
        self._pending[counted] = count
        batch.set_progress(scope, *position, count)

    def _keep_pending(self) -> None:
        """Take the counting batch's counts as kept (it committed, or is sealed)."""
        for (scope, position), count in self._pending.items():
            self._counted[scope][position] = count
        self._counting, self._pending = None, {}
