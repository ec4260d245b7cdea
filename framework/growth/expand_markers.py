"""The markers of a partition-count change in progress (``framework.growth.expand``'s steps 4
and 5): which ones it writes (a growth marker in each grown partition's parent, a drain marker
in each deleted partition), and finding each again after the fence (a rerun) or writing it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from framework.coordination.registry import TopicEntry
from framework.growth.marker_log import find_marker, is_compacted, write_marker
from framework.growth.markers import MarkerName, marker_step
from framework.kafka import Kafka
from rebalance import Grow, Shrink, TopicHistory, parent

__all__ = ["ChangeMarker", "accepted_ids", "change_markers", "write_change_markers"]


@dataclass(frozen=True)
class ChangeMarker:
    """One marker the change in progress writes: to ``topic[partition]``, about ``subject``
    (a grown child, or the deleted partition itself), as ``name``."""

    partition: int
    subject: int
    name: MarkerName


def change_markers(entry: TopicEntry) -> list[ChangeMarker]:
    """The markers of the change in progress (the history's last step), by subject."""
    history = entry.history
    step = history.last_step
    index = len(history.counts) - 1
    before = history.counts[-2]
    if isinstance(step, Shrink):
        return [
            ChangeMarker(d, d, MarkerName(step.count, d, index, drain=True))
            for d in range(step.count, before)
        ]
    assert isinstance(step, Grow)
    return [
        ChangeMarker(
            grown_parent(c, history.initial_partitions), c, MarkerName(step.count, c, index)
        )
        for c in range(before, step.count)
    ]


def grown_parent(child: int, initial: int) -> int:
    found = parent(child, initial)
    assert found is not None  # grown partitions are never initial partitions
    return found


def write_change_markers(
    kafka: Kafka, entry: TopicEntry, report: Callable[[str], None], stop_after_one: bool
) -> dict[int, int] | None:
    """Each marker's offset by its subject, found again (a rerun) or written; ``None`` when
    ``stop_after_one`` stopped after the first one written."""
    change = entry.growth
    assert change is not None and change.fence_ends is not None
    topic = entry.topic
    compacted = entry.compacted or is_compacted(kafka, topic)
    written: dict[int, int] = {}
    producer = kafka.producer()
    try:
        for marker in change_markers(entry):
            start = change.fence_ends[marker.partition]
            ids = accepted_ids(topic, entry.history, marker.name)
            found = find_marker(kafka, topic, marker.partition, start, ids)
            if found is None:
                marker_id = marker.name.marker_id(topic)
                found = write_marker(
                    producer, topic, marker.partition, marker_id, marker.subject,
                    compacted=compacted,
                )  # fmt: skip
                if stop_after_one:
                    return None
                # another run of the change may have written one meanwhile: the first in the
                # log is the one (the one processors met first), whichever run records it
                found = find_marker(kafka, topic, marker.partition, start, ids) or found
            written[marker.subject] = found
            what = "drain marker" if marker.name.drain else "marker"
            report(f"{what} for partition {marker.subject} at {topic}[{marker.partition}]@{found}")
    finally:
        producer.close()
    return written


def accepted_ids(topic: str, history: TopicHistory, name: MarkerName) -> set[str]:
    """The ids a marker of the step in progress may carry: its own, and for a growth recorded
    before ids named their step (``expand`` of an older splitstate stopped midway), the id
    without the step."""
    ids = {name.marker_id(topic)}
    old = MarkerName(name.count, name.partition)
    if not name.drain and marker_step(history, old) == name.step:
        ids.add(old.marker_id(topic))
    return ids
