"""A growth child's base mark as a recorded fact (``time.input_order: canonical``).

A growth child (a new life of partition ``c``, its keys from its parent ``p``) starts its
marks from its *base*: ``p``'s mark at ``c``'s growth marker (``framework.order.marks``), so a
key's marks stay monotone across its lineage. Which processor reads ``c``, whether it reads
``p`` too, and when it is assigned must not change it, so the base is recorded:

- **Found** by whoever reads ``p`` past the marker (``ChildBases.marker_read``): the marker
  the registry records for ``c`` or, before it records one, the first growth marker of ``c``
  read in ``p`` (the rule of placement, ``framework.growth.placement_check``); the base is
  ``p``'s mark once the marker is read, or, while ``p``'s own base is not known yet, the
  larger of that and ``p``'s base once found. A marker of a step the registry view does not
  show yet is kept with its mark, its base found once the view shows the step.
- **Kept** with the next batch given to ``InputOrder.applied`` once it is found (``write``:
  the progress scopes ``GROWTH_BASE_SCOPE`` and ``GROWTH_LIFE_SCOPE``, in the same state
  write as the offsets; the batch that commits the parent past the marker, or one before
  it; a marker read before the registry view shows its step is kept so instead, with its
  mark, until the view shows it: ``framework.runtime.early_markers``), so a processor
  killed before publishing finds it at its next start, whichever partitions it reads then;
  one killed before that commit reads the parent again from before the marker and finds
  it again.
- **Published** once committed (``publish_stored``, at each ``take``: it reads the state,
  which holds only committed batches) to the app's control log as a ``growth_base`` record
  (``GrowthBases.publish``; idempotent: the first record of a life applies), again at a
  start if the publish was lost.
- **Used** by whoever reads ``c`` from its life's start (``assign``): the recorded base, or
  the one its state keeps (found here, or computed by the Spark build it started from; not
  the mark stored with ``c``'s offset there, which need not be a base), else ``c`` waits
  (nothing of it released, its offset kept at its life's start, its held records holding
  the other inputs back) until the base is found here or recorded; while ``p`` is read here
  and not past the marker, ``p``'s mark bounds ``c``'s ``R`` from below meanwhile
  (``MergeBuffer.assign``'s ``parent``).

The value depends only on ``p``'s log, its own base and the app's event-time rule, so every
writer that read ``p`` from its start or a stored mark computes the same (a catch-up's
receiver too, when it reads ``p`` up to a recorded marker: it hands its marks over at F,
``framework.runtime.catchup_order``; one that does not starts ``c`` from no mark, with a
warning); the control log keeps the first record of a life. A splitstate
before these records, or a run under ``input_order: arrival``, publishes none: a child whose
parent such a run read past the marker waits until a ``growth_base`` record names its base.

The life of ``c`` is named by ``(topic, c, its life's start offset)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from framework.coordination.registry import TopicEntry
from framework.growth.markers import MarkerName, marker_growth, marker_step
from framework.input_times import GROWTH_BASE_SCOPE, GROWTH_LIFE_SCOPE
from framework.kafka import Message
from framework.order import NO_FLOOR, MergeBuffer
from framework.runtime.early_markers import EarlyMarkers
from framework.runtime.recorded_bases import (
    ControlBases,
    GrowthBases,
    LifeKey,
    MemoryBases,
    growth_base_record,
)
from rebalance import Grow, parent
from rebalance.positions import Position
from statestore import ProcessorDatabase, StateBatch

__all__ = [
    "GROWTH_BASE_SCOPE",
    "GROWTH_LIFE_SCOPE",
    "ChildBases",
    "ControlBases",
    "GrowthBases",
    "Life",
    "MemoryBases",
    "growth_base_record",
    "life_of",
]


#: a marker's step the registry view does not show yet
_UNKNOWN = object()


class Life:
    """A growth child read from its life's start: its life, its parent, and the offset of
    its marker there as the registry records it (``None``: not recorded yet)."""

    __slots__ = ("key", "marker", "parent")

    def __init__(self, key: LifeKey, parent: Position, marker: int | None) -> None:
        self.key, self.parent, self.marker = key, parent, marker


def life_of(entry: TopicEntry | None, position: Position, start: int) -> Life | None:
    """``position``'s growth life when it is read from that life's start (``start``), else
    ``None`` (an initial partition, or read past its life's start: its stored mark holds)."""
    if entry is None:
        return None
    topic, partition = position
    history = entry.history
    grown = [step for step in history.steps if isinstance(step, Grow)]
    life = next((step for step in reversed(grown) if partition in step.starts), None)
    source = parent(partition, history.initial_partitions)
    if life is None or source is None or start != life.starts[partition]:
        return None
    return Life((topic, partition, start), (topic, source), life.markers.get(partition))


class ChildBases:
    """The growth bases a processor finds, keeps, publishes and waits for (module)."""

    def __init__(
        self,
        bases: GrowthBases,
        database: ProcessorDatabase,
        buffer: MergeBuffer[Any],
        inputs: Callable[[], Mapping[str, TopicEntry]],
    ) -> None:
        self._bases, self._database, self._buffer, self._inputs = bases, database, buffer, inputs
        #: the bases found here, by life
        self._found: dict[LifeKey, int] = {}
        #: per parent whose base is not known, the lives whose marker it was read past,
        #: each with its own mark there
        self._deferred: dict[Position, list[tuple[LifeKey, int]]] = {}
        #: the children assigned here whose base is not known, with their life
        self._waiting: dict[Position, LifeKey] = {}
        #: the bases given here to children that waited (a marker read in one since: its
        #: child's base is at least that)
        self._bases_given: dict[Position, int] = {}
        #: per partition, the growth markers read in it of a step the registry view did not
        #: show yet: ``(offset, name, its mark there, whether it was based)``
        self._early: dict[Position, list[tuple[int, MarkerName, int, bool]]] = {}
        #: the lives whose base a batch was given to keep (since the last drop)
        self._given: set[LifeKey] = set()
        #: the lives whose base this run published (or found recorded)
        self._published: set[LifeKey] = set()
        #: whether the state may hold a base not published yet
        self._unpublished = True
        #: the markers read early whose parent's base was known, kept with the state
        self._kept_early = EarlyMarkers(database)

    def known(self, key: LifeKey) -> int | None:
        """The base of a life as recorded, or found here."""
        recorded = self._bases.recorded(*key)
        return recorded if recorded is not None else self._found.get(key)

    def kept(self, key: LifeKey) -> int | None:
        """The base of a life the state keeps (found by this processor, or computed by the
        Spark build it was started from), not published yet perhaps."""
        topic, partition, start = key
        if self._database.progress(GROWTH_LIFE_SCOPE).get((topic, partition)) != start:
            return None
        return self._database.progress(GROWTH_BASE_SCOPE).get((topic, partition))

    def met(self, key: LifeKey) -> bool:
        """Whether the marker of ``key`` was read here (its base found, or waiting for its
        parent's)."""
        return key in self._found or any(
            k == key for lives in self._deferred.values() for k, _ in lives
        )

    def assign(
        self,
        entry: TopicEntry | None,
        position: Position,
        start: int,
        *,
        rank: int,
        reading: Mapping[Position, int],
    ) -> bool:
        """Assign ``position`` to the buffer from ``start`` if it is a growth child read from
        its life's start (``entry``: its topic's; whether it was): with its base recorded (or
        kept in the state: ``kept``), else waiting for it, linked to its parent while the
        parent is read here (``reading``: each partition's next offset) and not past the
        marker. A mark stored with the offset at the life's start is not taken: it need not
        be a base (a Spark build before bases were kept stored ``NO_FLOOR`` there)."""
        life = life_of(entry, position, start)
        if life is None:
            return False
        known = self.known(life.key)
        base = known if known is not None else self.kept(life.key)
        if base is not None:
            self._buffer.assign(position, start, base, rank)
            return True
        read_to = reading.get(life.parent)
        linked = (
            read_to is not None
            and (life.marker is None or read_to <= life.marker)
            and not self.met(life.key)
        )
        parent = (life.parent, None) if linked else None
        self._buffer.assign(position, start, base=NO_FLOOR, rank=rank, parent=parent, based=False)
        self._waiting[position] = life.key
        return True

    def forget(self, position: Position) -> None:
        """``position`` is no longer read here (what it found and did not give stays)."""
        for kept in (self._waiting, self._deferred, self._bases_given, self._early):
            kept.pop(position, None)

    def marker_read(self, position: Position, offset: int, message: Message) -> None:
        """``message`` at ``offset`` of ``position`` was added to the buffer: a growth marker
        of a child's life in it gives that life's base (one of a step the registry view
        does not show yet: once it does, ``resolve``)."""
        headers = message.headers()
        name = None if not headers else marker_growth(position[0], headers)
        if name is None or name.drain:
            return
        own, based = self._buffer.mark(position), self._buffer.based(position)
        key = self._marked_life(position, offset, name)
        if key is _UNKNOWN:
            self._early.setdefault(position, []).append((offset, name, own, based))
            if based:  # (else ``position`` waits at its life's start: not committed past)
                self._kept_early.add(position[0], offset, name, own)
        elif isinstance(key, tuple):
            self._met_at(position, key, own, based)

    def _met_at(self, position: Position, key: LifeKey, own: int, based: bool) -> None:
        """The marker of ``key`` was read in ``position`` at its mark ``own`` (``based``:
        ``position``'s base was known then)."""
        if self.met(key):
            return  # (not the first one met: the first is it)
        if based or position in self._bases_given:
            self._set(key, max(own, self._bases_given.get(position, own)))
            return
        self._deferred.setdefault(position, []).append((key, own))
        unlinked = (key[0], key[1])
        if self._waiting.get(unlinked) == key:
            self._buffer.unlink(unlinked)  # (its parent's mark no longer bounds it)

    def _marked_life(
        self, position: Position, offset: int, name: MarkerName
    ) -> LifeKey | object | None:
        """The life of a child of ``position`` whose growth marker ``name`` is at ``offset``
        (``None``: not a child of it, or not the marker the registry records; ``_UNKNOWN``:
        the registry view does not show its step yet)."""
        topic = position[0]
        entry = self._inputs().get(topic)
        if entry is None:
            return None
        history = entry.history
        index = marker_step(history, name)
        if index is None:
            return _UNKNOWN if name.count > history.partitions else None
        step = history.steps[index - 1]
        child = name.partition
        if not isinstance(step, Grow) or child not in step.starts:
            return None
        if parent(child, history.initial_partitions) != position[1]:
            return None
        if step.markers.get(child, offset) != offset:
            return None  # (another copy: the registry's is the marker)
        return (topic, child, step.starts[child])

    def resolve(self) -> None:
        """Give each waiting child its base recorded since; find the bases of markers read
        before the registry view showed their step, if it does now."""
        for position, early in list(self._early.items()):
            left = []
            for offset, name, own, based in early:
                key = self._marked_life(position, offset, name)
                if key is _UNKNOWN:
                    left.append((offset, name, own, based))
                elif isinstance(key, tuple):
                    self._met_at(position, key, own, based)
            self._early[position] = left
            if not left:
                del self._early[position]
        self._resolve_kept()
        for child, key in list(self._waiting.items()):
            base = self.known(key)
            if base is not None and self._waiting.get(child) == key:
                self._give(child, base)

    def _resolve_kept(self) -> None:
        """Find the bases of the early markers kept (read here, perhaps before a restart, in
        a parent perhaps read elsewhere now) whose step the registry view shows now."""
        for child, early in self._kept_early.items():
            entry = self._inputs().get(child[0])
            if entry is None:
                continue
            source = parent(child[1], entry.history.initial_partitions)
            key = (
                None
                if source is None
                else self._marked_life((child[0], source), early.offset, early.name)
            )
            if key is _UNKNOWN:
                continue
            self._kept_early.settle(child)
            if isinstance(key, tuple) and self._bases.recorded(*key) is None:
                self._set(key, early.base)

    def _set(self, key: LifeKey, base: int) -> None:
        """The base of ``key`` is found here: kept, published, given to its child here."""
        base = self._found.setdefault(key, base)
        self._unpublished = True
        child = (key[0], key[1])
        if self._waiting.get(child) == key:
            self._give(child, base)

    def _give(self, child: Position, base: int) -> None:
        """``child`` (waiting) takes ``base``; the bases found in it while it waited are
        found now (the larger of its base and its own mark at each marker)."""
        del self._waiting[child]
        self._buffer.base(child, base)
        self._bases_given[child] = base
        for key, own in self._deferred.pop(child, []):
            self._set(key, max(base, own))

    def write(self, batch: StateBatch) -> None:
        """Keep with ``batch`` the bases found here that no batch was given yet."""
        for key in sorted(self._found.keys() - self._given):
            topic, partition, start = key
            batch.set_progress(GROWTH_BASE_SCOPE, topic, partition, self._found[key])
            batch.set_progress(GROWTH_LIFE_SCOPE, topic, partition, start)
            self._given.add(key)
        self._kept_early.write(batch)

    def dropped(self) -> None:
        """The batches not committed were dropped: give the bases found again."""
        self._given.clear()
        self._kept_early.dropped()

    def rewound(self) -> None:
        """Every partition is read again from the state's offset: what waited for a parent's
        base is found again as the parent is read again."""
        for kept in (self._deferred, self._waiting, self._bases_given, self._early):
            kept.clear()

    def publish_stored(self) -> None:
        """Publish each base the state keeps that the control log does not record yet."""
        if not self._unpublished:
            return
        bases = self._database.progress(GROWTH_BASE_SCOPE)
        lives = self._database.progress(GROWTH_LIFE_SCOPE)
        failed = False
        for (topic, partition), base in sorted(bases.items()):
            start = lives.get((topic, partition))
            key = (topic, partition, 0 if start is None else start)
            if start is None or key in self._published:
                continue
            if self._bases.recorded(*key) is not None or self._bases.publish(*key, base):
                self._published.add(key)
            else:
                failed = True
        self._unpublished = failed or not self._found.keys() <= self._published
