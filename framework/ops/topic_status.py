"""What ``splitstate status`` (and ``topics create``) say of an input topic's partition
history: its counts (``4 -> 8 -> 5 -> 7``), growth thresholds, a change in progress, the
deleted partitions and how far the app's consumer group drained each, and the survivors that
hold a deleted partition's keys until then."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from framework.coordination.registry import TopicEntry
from rebalance import Shrink, TopicHistory

__all__ = ["DeletedPartition", "SurvivorHold", "TopicStatus", "history_line", "topic_status"]


@dataclass(frozen=True)
class DeletedPartition:
    """A deleted partition: the offset of the drain marker of the shrink that deleted it
    (``None``: not recorded yet) and the group's committed offset there (``None``: none)."""

    partition: int
    drain: int | None
    committed: int | None

    @property
    def drained(self) -> bool:
        """Whether the group read it past its drain marker."""
        return self.drain is not None and self.committed is not None and self.committed > self.drain

    def render(self) -> str:
        """``5 (drained)``, ``6 (draining: group at 120, drain marker at 3310)``..."""
        if self.drained:
            return f"{self.partition} (drained)"
        at = "no committed offset" if self.committed is None else f"group at {self.committed}"
        marker = (
            "drain marker not recorded yet"
            if self.drain is None
            else f"drain marker at {self.drain}"
        )
        return f"{self.partition} (draining: {at}, {marker})"


@dataclass(frozen=True)
class SurvivorHold:
    """Survivor ``survivor`` takes the keys of deleted ``deleted`` from offset ``hold_from``
    on, and delivers none of them until the group passed ``deleted``'s drain marker."""

    survivor: int
    hold_from: int
    deleted: DeletedPartition

    def render(self, topic: str) -> str:
        """One line of the report."""
        d = self.deleted
        until = (
            f"passes offset {d.drain} (now at {'-' if d.committed is None else d.committed})"
            if d.drain is not None
            else "is drained (its drain marker is not recorded yet)"
        )
        return (
            f"  {topic}[{self.survivor}] holds keys of {topic}[{d.partition}] from offset "
            f"{self.hold_from} until {topic}[{d.partition}] {until}"
        )


@dataclass(frozen=True)
class TopicStatus:
    """An input topic's partition history, thresholds, the change in progress, its deleted
    partitions, the holds of their survivors and the partitions a growth holds."""

    topic: str
    counts: list[int]
    thresholds: dict[int, int]
    pending: list[int]
    growing_to: int | None
    blocked: dict[int, str]
    #: the kind of the change in progress (``grow`` or ``shrink``)
    changing: str = "grow"
    deleted: list[DeletedPartition] = field(default_factory=list)
    holds: list[SurvivorHold] = field(default_factory=list)

    def render(self) -> list[str]:
        """Lines for the report."""
        lines = [f"input {self.topic}: partitions {' -> '.join(map(str, self.counts))}"]
        if self.thresholds:
            marks = ", ".join(f"{c}@{o}" for c, o in sorted(self.thresholds.items()))
            lines.append(f"  thresholds (partition@offset in its parent): {marks}")
        if self.deleted:
            lines.append(f"  deleted: {', '.join(d.render() for d in self.deleted)}")
        if self.growing_to is not None:
            what, markers = (
                ("shrinking", "drain markers")
                if self.changing == "shrink"
                else ("growing", "thresholds")
            )
            lines.append(
                f"  {what} to {self.growing_to}: {markers} pending for {self.pending} "
                "(`splitstate expand` running, or run it again to resume)"
            )
        lines.extend(hold.render(self.topic) for hold in self.holds)
        for partition, reason in sorted(self.blocked.items()):
            lines.append(f"  {self.topic}[{partition}] blocked: {reason}")
        return lines


def history_line(history: TopicHistory) -> str:
    """``4 -> 8 -> 5`` and, with deleted partitions, ``(deleted 5..7)``."""
    counts = " -> ".join(str(c) for c in history.counts)
    deleted = history.deleted()
    if not deleted:
        return counts
    first, last = deleted[0], deleted[-1]
    return f"{counts} (deleted {first if first == last else f'{first}..{last}'})"


def topic_status(
    entry: TopicEntry, committed: Mapping[tuple[str, int], int], blocked: Mapping[int, str]
) -> TopicStatus:
    """The status of ``entry``'s topic, with the group's ``committed`` offsets."""
    history, topic = entry.history, entry.topic
    deleted = {
        d: DeletedPartition(d, _drain(history, d), committed.get((topic, d)))
        for d in history.deleted()
    }
    holds = [
        SurvivorHold(t, hold_from, deleted[d])
        for d, (t, hold_from) in sorted(_holds(history).items())
        if not deleted[d].drained
    ]
    change = entry.growth
    return TopicStatus(
        topic,
        list(history.counts),
        dict(history.thresholds),
        entry.pending(),
        change.partitions if change is not None else None,
        dict(blocked),
        change.kind if change is not None else "grow",
        list(deleted.values()),
        holds,
    )


def _deleting_step(history: TopicHistory, deleted: int) -> Shrink | None:
    """The last shrink that deleted ``deleted`` (``None`` if no shrink did)."""
    found = None
    for step, before in zip(history.steps, history.counts, strict=False):
        if isinstance(step, Shrink) and step.count <= deleted < before:
            found = step
    return found


def _drain(history: TopicHistory, deleted: int) -> int | None:
    step = _deleting_step(history, deleted)
    return None if step is None else step.drains.get(deleted)


def _holds(history: TopicHistory) -> dict[int, tuple[int, int]]:
    """Each deleted partition -> its survivor at the shrink that deleted it, and the
    survivor's hold offset."""
    found = {}
    for d in history.deleted():
        step = _deleting_step(history, d)
        if step is not None:
            t = history.survivor(d, step.count)
            found[d] = (t, step.holds[t])
    return found
