"""Which new partitions must wait: the ordering gate of a growth (KIP-253 section 8).

A partition created by a growth holds keys whose earlier records sit in its parent up to the
threshold (the marker's offset). It may only be read once the app's position on the parent
has passed the threshold -- this processor's own position when it reads the parent, the
consumer group's committed offset otherwise. A partition read before (it has an offset) is
never gated again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from framework.coordination.registry import TopicEntry
from rebalance.positions import Position

__all__ = ["blocked_partitions"]


def blocked_partitions(
    inputs: Mapping[str, TopicEntry],
    candidates: Iterable[Position],
    own_offsets: Mapping[Position, int],
    parent_position: Callable[[Position], int | None],
) -> dict[Position, str]:
    """The ``candidates`` that may not be read yet, each with the reason."""
    blocked: dict[Position, str] = {}
    for topic, partition in candidates:
        entry = inputs.get(topic)
        if entry is None or partition >= entry.partitions:
            continue
        gate = entry.history.gate(partition)
        if gate is None or own_offsets.get((topic, partition), 0) > 0:
            continue
        parent, threshold = gate
        if threshold is None:
            blocked[(topic, partition)] = (
                f"waiting for `splitstate expand` to record the threshold in {topic}[{parent}]"
            )
            continue
        position = parent_position((topic, parent))
        if position is None or position <= threshold:
            blocked[(topic, partition)] = (
                f"waiting until {topic}[{parent}] passes offset {threshold} (now at "
                f"{'-' if position is None else position})"
            )
    return blocked
