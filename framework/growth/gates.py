"""Ordering gates (KIP-253 sections 3, 5 and 8): which input records must wait, and for what.

A key's record may be read only once the app read the key's earlier records. Those sit in
another partition where a step of the topic's history brought the key into the record's
partition (``TopicHistory.entry_gate``):

- a growth starts a *life* of partition ``c``: its keys came from its parent, so their
  records wait until the parent is read past ``c``'s marker;
- a shrink makes ``t`` the survivor of the deleted partitions merging into it: from its hold
  offset on, a record of a key that lived in a deleted ``d`` waits until ``d`` is read past
  its drain marker; ``t``'s own keys never wait.

A boundary not recorded yet (no marker written) waits. A partition is *reached* up to an
offset (``TopicHistory.reached``) when its position is there -- this processor's next offset
if it reads the partition, else the consumer group's committed offset -- and, recursively,
every gate of it below that offset is met: a survivor holding some keys lets its markers and
its other keys pass, so its position alone says nothing of the held keys. Markers (keyless,
or keyed by their id on a compacted topic) never wait; a tick (``framework.time.ticks``)
waits for every gate of its partition, as it applies to every key living there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from framework.coordination.registry import TopicEntry
from rebalance import PartitionGate, TopicHistory
from rebalance.positions import Position

__all__ = ["Gates", "PositionOf", "Wait", "blocked_partitions"]

#: ``(partition, needed)``: ``partition`` must be reached up to ``needed`` (exclusive;
#: ``None``: its boundary is not recorded yet)
Need = tuple[int, int | None]
#: the position of a partition, as the caller knows it (``None``: never read)
PositionOf = Callable[[Position], int | None]


@dataclass(frozen=True)
class Wait:
    """Why a record of ``topic[partition]`` waits: ``topic[source]`` is not reached up to
    ``needed`` (a deleted partition whose keys merged into ``partition`` when ``source`` is
    the higher; else ``partition`` is a growth's new life and ``source`` its parent)."""

    topic: str
    partition: int
    source: int
    needed: int | None

    @property
    def shrink(self) -> bool:
        """Whether a shrink merged the waiting keys into ``partition``."""
        return self.source > self.partition

    def reason(self, position: int | None) -> str:
        """Why, for the log and ``splitstate status`` (``position``: ``source``'s)."""
        topic, source = self.topic, self.source
        now = "-" if position is None else str(position)
        if self.shrink:
            head = f"{topic}[{self.partition}] holds keys of {topic}[{source}]"
            if self.needed is None:
                return f"{head} until `splitstate expand` records its drain marker"
            return f"{head} until it passes offset {self.needed - 1} (now at {now})"
        if self.needed is None:
            return f"waiting for `splitstate expand` to record the threshold in {topic}[{source}]"
        return f"waiting until {topic}[{source}] passes offset {self.needed - 1} (now at {now})"


class _Positions(Mapping[int, int]):
    """The positions of ``topic``'s partitions, asked of ``position`` when needed."""

    def __init__(self, topic: str, created: int, position: PositionOf) -> None:
        self._topic, self._created, self._position = topic, created, position

    def __getitem__(self, partition: int) -> int:
        found = self._position((self._topic, partition))
        if found is None:
            raise KeyError(partition)
        return found

    def __iter__(self) -> Iterator[int]:
        return (p for p in range(self._created) if p in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class Gates:
    """The ordering gates of an app's input topics (``histories``, kept current with
    ``adopt``), remembering the needs found met: positions only grow, so a met need stays
    met."""

    def __init__(self, histories: Mapping[str, TopicHistory]) -> None:
        self._histories: dict[str, TopicHistory] = {}
        #: ``(topic, partition, needed)`` found reached (see ``opened``)
        self._opened: set[tuple[str, int, int]] = set()
        #: per partition, its gates not found open for every key yet, by offset
        self._pending: dict[Position, list[PartitionGate]] = {}
        self.adopt(histories)

    def adopt(self, histories: Mapping[str, TopicHistory]) -> None:
        """Take the input topics' current histories (a step recorded, then its markers)."""
        for topic, history in histories.items():
            if self._histories.get(topic) != history:
                self._histories[topic] = history
                self._pending = {p: g for p, g in self._pending.items() if p[0] != topic}

    def pending(self, topic: str, partition: int, offset: int) -> bool:
        """Whether a gate of ``topic[partition]`` at or below ``offset`` may still hold a
        record there (cheap: asked for every record read)."""
        gates = self._gates(topic, partition)
        return bool(gates) and gates[0].from_offset <= offset

    def waits(
        self, topic: str, partition: int, offset: int, h: int | None, position: PositionOf
    ) -> Wait | None:
        """What the record at ``topic[partition]@offset`` (key hash ``h``; ``None``: no key,
        which never waits) waits for; ``None`` when it may be read now."""
        history = self._histories.get(topic)
        if history is None or h is None or not 0 <= partition < history.created:
            return None
        need = history.entry_gate(h, partition, offset)
        if need is None or self.opened(topic, need, position):
            return None
        return Wait(topic, partition, need[0], need[1])

    def tick_waits(
        self, topic: str, partition: int, offset: int, position: PositionOf
    ) -> Wait | None:
        """What a tick at ``topic[partition]@offset`` waits for: a tick applies to every key
        living there, so it waits for whatever a record there of any of them would (every
        gate of the partition at or below ``offset``); ``None`` when it may be read now."""
        for gate in self._gates(topic, partition):
            if gate.from_offset > offset:
                break
            for need in gate.needs:
                if not self.opened(topic, need, position):
                    return Wait(topic, partition, need[0], need[1])
        return None

    def settle(self, topic: str, partition: int, offset: int, position: PositionOf) -> None:
        """Forget the gates of ``topic[partition]`` at or below ``offset`` whose needs are all
        met: no record there waits for them any more."""
        gates = self._gates(topic, partition)
        while gates and gates[0].from_offset <= offset:
            if not all(self.opened(topic, need, position) for need in gates[0].needs):
                return
            gates.pop(0)

    def opened(self, topic: str, need: Need, position: PositionOf) -> bool:
        """Whether ``need``'s partition is reached up to its offset (``TopicHistory.reached``)."""
        source, needed = need
        if needed is None:
            return False
        if (topic, source, needed) in self._opened:
            return True
        history = self._histories[topic]
        if not history.reached(source, needed, _Positions(topic, history.created, position)):
            return False
        self._opened.add((topic, source, needed))
        return True

    def _gates(self, topic: str, partition: int) -> list[PartitionGate]:
        """The gates of ``topic[partition]`` not found open yet, by offset."""
        where = (topic, partition)
        gates = self._pending.get(where)
        if gates is None:
            history = self._histories.get(topic)
            gates = (
                sorted(history.partition_gates(partition), key=lambda g: g.from_offset)
                if history is not None and 0 <= partition < history.created
                else []
            )
            self._pending[where] = gates
        return gates


def blocked_partitions(
    inputs: Mapping[str, TopicEntry],
    candidates: Iterable[Position],
    own_offsets: Mapping[Position, int],
    parent_position: PositionOf,
) -> dict[Position, str]:
    """The ``candidates`` whose current life a growth's gate holds, each with the reason: the
    life is reached (the partition's offset in ``own_offsets`` is at or past its start; a
    partition re-grown onto a deleted one is held again at its new life) and its parent is
    not reached past the growth's marker (``parent_position``: where a partition is read up
    to). A survivor's hold of merged keys is not listed here (it holds keys, not partitions).
    """
    gates = Gates({name: entry.history for name, entry in inputs.items()})
    blocked: dict[Position, str] = {}
    for topic, partition in candidates:
        entry = inputs.get(topic)
        if entry is None or not 0 <= partition < entry.history.created:
            continue
        at = own_offsets.get((topic, partition), 0)
        for gate in entry.history.partition_gates(partition):
            (source, needed), *_more = gate.needs
            if gate.from_offset > at or source > partition:
                continue  # not reached yet, or a shrink's hold
            if not gates.opened(topic, (source, needed), parent_position):
                wait = Wait(topic, partition, source, needed)
                blocked[(topic, partition)] = wait.reason(parent_position((topic, source)))
    return blocked
