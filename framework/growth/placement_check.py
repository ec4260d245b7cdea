"""The placement check of every keyed input record, before anything runs
(``framework.growth.placement`` says what is placed), and the counts of the records without
the ``splitstate.count`` header it passed (``UNFENCED_SCOPE``) and refused
(``UNPLACED_SCOPE``), kept in the state batches so that they stand only once a batch commits.

``RecordProcessor`` runs it on every path that folds records into state -- the live loop,
restore mode, a receiver's catch-up, the Spark fold -- so each judges a record the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Protocol

import mmh3

from framework.coordination.registry import Growth, TopicEntry
from framework.growth.expand_markers import accepted_ids, change_markers
from framework.growth.late import Homes, late_reason
from framework.growth.markers import marker_growth, marker_step, unrecorded_marker
from framework.growth.placement import (
    UNFENCED_SCOPE,
    UNPLACED_SCOPE,
    Layouts,
    NoCountHeader,
    count_header,
    history_layouts,
    misplaced_reason,
    placed_by,
    unplaced_reason,
)
from framework.kafka import KafkaIOError
from framework.records import InputMessage
from rebalance import TopicHistory, bucket
from rebalance.steps import Grow
from statestore import BatchStatus, StateBatch

__all__ = ["PlacementCheck", "RegistryView"]

Position = tuple[str, int]
#: a marker met in the input: (the step that wrote it, its partition: a grown child, or a
#: deleted partition, kind: ``marker`` or ``drain``)
MetMarker = tuple[int, int, str]

#: the offset of the first marker with one of the ids in ``topic[partition]`` at or after
#: ``start`` (``None``: none): ``(topic, partition, start, ids)``
MarkerFinder = Callable[[str, int, int, Collection[str]], int | None]


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
    history (its steps and their boundaries, the registry's, kept current with ``adopt``;
    just ``N`` for a topic without one): without the header, any of its counts places a key;
    with the markers met in the input, its boundaries say where each key lives at each
    offset (a record elsewhere is late: ``framework.growth.late``). ``unfenced``/
    ``unplaced``: the counts the processor's state holds. ``growths``: the input topics'
    changes in progress (the registry's). A marker met in the input counts only if these
    record its step (``marker``). ``find_marker``: reads the input for the markers of a change
    in progress that lie before where this run started reading a partition (without it,
    only the markers read are met).
    """

    def __init__(
        self,
        initial_partitions: Mapping[str, int],
        histories: Mapping[str, TopicHistory],
        unfenced: Mapping[Position, int],
        unplaced: Mapping[Position, int],
        growths: Mapping[str, Growth] | None = None,
        *,
        find_marker: MarkerFinder | None = None,
    ) -> None:
        self.initial_partitions = dict(initial_partitions)
        self._find_marker = find_marker
        #: the input topics whose change in progress has its fence ends recorded
        self._fenced: set[str] = set()
        #: (topic, partition, step) searched for markers met before this processor read on
        self._searched: set[tuple[str, int, int]] = set()
        #: per partition of a fenced topic, the last offset ``search_markers`` was given
        self._seen: dict[Position, int] = {}
        #: each input topic's partition counts (its history's) and their layouts
        self._counts: dict[str, tuple[int, ...]] = {}
        self._layouts: dict[str, Layouts] = {}
        for name, initial in self.initial_partitions.items():
            self._counts[name] = (initial,)
            self._layouts[name] = history_layouts((initial,))
        #: each input topic's history and change in progress, as last read from the registry:
        #: what markers are checked against
        self._registry: dict[str, tuple[TopicHistory, Growth | None]] = {}
        #: per input topic, the markers met whose offsets the registry does not record yet
        self._met: dict[str, dict[MetMarker, int]] = {}
        #: per input topic, where keys live: its registry history with the markers met
        self._homes: dict[str, Homes] = {}
        #: per input partition, the offset up to which records were read before the view
        #: adopted last was read from the registry (``confirm``)
        self._confirmed: dict[Position, int] = {}
        self.adopt(histories, growths)
        self._counted: dict[str, dict[Position, int]] = {}
        self._counting: StateBatch | None = None  # the batch ``_pending`` counts belong to
        self._pending: dict[tuple[str, Position], int] = {}  # by (scope, position)
        self.recount(unfenced, unplaced)

    def adopt(
        self, histories: Mapping[str, TopicHistory], growths: Mapping[str, Growth] | None = None
    ) -> None:
        """Take the input topics' current histories (a step recorded its count, then its
        markers) and their changes in progress (``growths``), both the registry's."""
        self._confirmed = {}  # a view adopted may be older than a read that confirmed records
        for topic, history in histories.items():
            growth = (growths or {}).get(topic)
            self._registry[topic] = (history, growth)
            if growth is not None and growth.fence_ends is not None:
                self._fenced.add(topic)
            else:
                self._fenced.discard(topic)
            self._counts[topic] = history.counts
            self._layouts[topic] = history_layouts(history.counts)
            self._place(topic)

    def confirm(
        self, entries: RegistryView, read: Iterable[InputMessage] = ()
    ) -> dict[str, TopicEntry]:
        """Adopt ``entries`` (the topic registry's, read after the records ``read`` were:
        ``RecordProcessor.confirm_markers``) from now on; returns the input topics'. Only the
        input topics' entries are read: another app's that cannot be read is never met. The
        view is newer than each record ``read``, so none of them (nor a record before it) is
        stale (``stale_marker``, ``stale_key``) any more, until another view is adopted."""
        found: dict[str, TopicEntry] = {}
        for topic in self.initial_partitions:
            entry = entries.get(topic)
            if entry is not None:
                found[topic] = entry
                growth = {} if entry.growth is None else {topic: entry.growth}
                self.adopt({topic: entry.history}, growth)
        confirmed = self._confirmed
        for message in read:
            named, partition, offset = message.topic(), message.partition(), message.offset()
            if named is not None and partition is not None and offset is not None:
                where = (named, partition)
                confirmed[where] = max(offset, confirmed.get(where, -1))
        return found

    def stale_marker(self, where: tuple[str, int, int], headers: Any) -> bool:
        """Whether judging the marker at ``where`` needs a newer view of the registry: it
        names a step this view does not record (a marker no registry can record does not)."""
        return (
            not self._confirmed_at(where)
            and marker_growth(where[0], headers) is not None
            and self.unrecorded(where, headers) is not None
        )

    def stale_key(self, where: tuple[str, int, int], key: bytes) -> bool:
        """Whether judging the keyed record at ``where`` needs a newer view of the registry:
        its key does not live in its partition at its offset by this view (a step the view
        lacks, or a late record)."""
        topic, partition, offset = where
        homes = self._homes.get(topic)
        if homes is None or self._confirmed_at(where):
            return False
        return homes.home(mmh3.hash(key, 0, False), partition, offset) != partition

    def lives_at(self, key: bytes, where: tuple[str, int, int], steps: int | None = None) -> bool:
        """Whether a tick at ``where`` whose writer knew ``steps`` steps of the topic's history
        (``None``: every step this view has) applies to ``key``: by those steps and the
        markers met (``Homes.takes_tick``), or the topic's initial count without a history.
        A tick naming more steps than this view has is not judged here (``unknown_steps``)."""
        topic, partition, offset = where
        h = mmh3.hash(key, 0, False)
        homes = self._homes.get(topic)
        if homes is not None:
            return homes.takes_tick(h, partition, offset, steps)
        initial = self.initial_partitions.get(topic)
        return initial is None or bucket(h, initial, initial) == partition

    def known_steps(self, topic: str) -> int:
        """How many steps of ``topic``'s partition history this view has (what a tick this
        processor writes names)."""
        history = self._registry.get(topic, (None, None))[0]
        return 0 if history is None else len(history.steps)

    def stale_tick(self, where: tuple[str, int, int], steps: int | None) -> bool:
        """Whether judging the tick at ``where``, written knowing ``steps`` steps of its
        topic's history, needs a newer view of the registry: the view has fewer (its writer
        read a newer one), or it says none (a tick not written by a processor: judged by
        every step, so by a view read after it)."""
        if where[0] not in self.initial_partitions or self._confirmed_at(where):
            return False
        return steps is None or steps > self.known_steps(where[0])

    def unknown_steps(self, where: tuple[str, int, int], steps: int | None) -> str | None:
        """Why the tick at ``where`` cannot be judged by this view: it names more steps of
        its topic's history than the registry (as last read) records; ``None`` if it can."""
        topic = where[0]
        if steps is None or topic not in self.initial_partitions:
            return None  # (a topic not checked: every key takes its ticks)
        known = self.known_steps(topic)
        if steps <= known:
            return None
        return (
            f"written knowing {steps} steps (growths, shrinks) of {topic}'s partition history, "
            f"where the topic registry records {known}: it was not written against this app's "
            "registry (copied from another topic or cluster, or the registry was recreated), "
            "so which keys it applies to cannot be known; it was applied to none. Fix: nothing "
            "to redo (time moves on with the next tick); stop whatever writes such ticks."
        )

    def _confirmed_at(self, where: tuple[str, int, int]) -> bool:
        """Whether the record at ``where`` was read before the view adopted last was."""
        return where[2] <= self._confirmed.get((where[0], where[1]), -1)

    def unrecorded(self, where: tuple[str, int, int], headers: Any) -> str | None:
        """Why the marker at ``where`` (topic, partition, offset) is not one the registry
        (as this check knows it) records; ``None`` if it is."""
        history, growth = self._registry.get(where[0], (None, None))
        return unrecorded_marker(where, headers, history, growth)

    def marker(self, where: tuple[str, int, int], headers: Any) -> str | None:
        """A marker met at ``where``: if the registry records its step, the keys it moves
        leave this partition at the registry's offset or, before the registry records one,
        here (the first marker met is the one); otherwise why it moves nothing (a dead
        letter)."""
        refused = self.unrecorded(where, headers)
        if refused is None:
            topic, _partition, offset = where
            name = marker_growth(topic, headers)
            step = None if name is None else marker_step(self._registry[topic][0], name)
            if name is not None and step is not None:  # (a recorded marker names its step)
                met = (step, name.partition, "drain" if name.drain else "marker")
                if met not in self._met.setdefault(topic, {}):
                    self._met[topic][met] = offset
                    self._place(topic)
        return refused

    def _place(self, topic: str) -> None:
        """Where ``topic``'s keys live: its registry history, with each marker met that the
        registry does not record yet (its change is the last step) taken at its offset."""
        history = self._registry[topic][0]
        step = history.last_step
        met = self._met.get(topic, {})
        for (index, partition, kind), offset in sorted(met.items()):
            if index != len(history.steps) or step is None:
                continue  # the registry records it (steps are serialized)
            if kind == "marker" and isinstance(step, Grow) and partition not in step.markers:
                history = history.with_markers({partition: offset})
            elif kind == "drain" and not isinstance(step, Grow) and partition not in step.drains:
                history = history.with_drains({partition: offset})
        self._met[topic] = {k: o for k, o in met.items() if k[0] == len(history.steps)}
        self._homes[topic] = Homes(history)

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
        where no count of the topic's history does), or its key lives elsewhere at its
        offset (late); ``None`` if it is processed.
        Records without the header are counted in ``batch`` (unless restored)."""
        topic, partition, _offset = where
        initial = self.initial_partitions.get(topic)
        if initial is None:
            return None
        h = mmh3.hash(key, 0, False)  # key_hash(key), inlined: once, for every check below
        placed = count_header(headers)
        if isinstance(placed, NoCountHeader):
            return self._check_unheaded(batch, h, key, where, restore=restore)
        reason = misplaced_reason(h, key, (topic, partition), initial, placed)
        return reason if reason is not None else self._late(h, key, where, header=True)

    def _check_unheaded(
        self, batch: StateBatch, h: int, key: bytes, where: tuple[str, int, int], *, restore: bool
    ) -> str | None:
        """``check`` of a record without the count header, whose key's ``key_hash`` is
        ``h``: counted (unless restored) as processed or dead-lettered."""
        topic, partition, _offset = where
        position = (topic, partition)
        if not placed_by(h, partition, self._layouts[topic]):
            reason: str | None = unplaced_reason(h, key, topic, partition, self._counts[topic])
        else:
            reason = self._late(h, key, where, header=False)
        if not restore:
            self._count(batch, UNFENCED_SCOPE if reason is None else UNPLACED_SCOPE, position)
        return reason

    def _late(self, h: int, key: bytes, where: tuple[str, int, int], *, header: bool) -> str | None:
        """Why the record of ``key`` (hash ``h``) at ``where`` is late: its key lives
        elsewhere at its offset (``Homes.home``); ``None`` if it lives there."""
        topic, partition, offset = where
        homes = self._homes.get(topic)
        if homes is None:
            return None
        home = homes.home(h, partition, offset)
        if home == partition:
            return None
        return late_reason(key, where, homes.history, home, header=header)

    def search_markers(self, messages: Iterable[InputMessage]) -> None:
        """Before ``messages`` are judged: for a partition this run starts reading past its
        fence end (of a change in progress), the change's markers in it that lie before,
        found in the log (``find_marker``) and taken as met. This run did not read them (a
        restart, a partition taken over), while a run that read on met them; judged by the
        same markers, a record is late for both (and for every replay, once the registry
        records them). A run that read the partition through its fence end searches nothing:
        it meets them. ``KafkaIOError`` when the log cannot be searched."""
        if not self._fenced or self._find_marker is None:
            return
        for message in messages:
            topic, partition, offset = message.topic(), message.partition(), message.offset()
            if topic in self._fenced and partition is not None and offset is not None:
                self._search((topic, partition, offset), self._find_marker)

    def _search(self, where: tuple[str, int, int], find_marker: MarkerFinder) -> None:
        """``search_markers`` for the record at ``where``."""
        topic, partition, offset = where
        last = self._seen.get((topic, partition))
        self._seen[(topic, partition)] = offset
        history, growth = self._registry[topic]
        assert growth is not None and growth.fence_ends is not None  # (``_fenced``)
        fence_end = growth.fence_ends.get(partition)
        searched = (topic, partition, len(history.steps))
        if fence_end is None or offset <= fence_end or searched in self._searched:
            return
        self._searched.add(searched)
        if last is not None and fence_end - 1 <= last < offset:
            return  # read on through the fence end: every marker there is met in order
        met = self._met.setdefault(topic, {})
        for marker in change_markers(TopicEntry(history, growth=growth)):
            found = (searched[2], marker.subject, "drain" if marker.name.drain else "marker")
            if marker.partition != partition or found in met:
                continue
            ids = accepted_ids(topic, history, marker.name)
            try:
                at = find_marker(topic, partition, fence_end, ids)
            except KafkaIOError as error:
                self._searched.discard(searched)
                raise KafkaIOError(
                    f"could not search {topic}[{partition}] for the markers of the partition-"
                    f"count change in progress (this run starts reading it past them): {error}. "
                    "Its records are not judged without them: the processor exits, to search "
                    "again when restarted. Fix: make Kafka reachable."
                ) from None
            if at is not None and at < offset:
                met[found] = at
        self._place(topic)

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
