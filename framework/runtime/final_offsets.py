"""F: the offsets at which an old owner gives moved partitions away.

F is where the old owner's state ends, never below the group's committed offset (T1, which
the receiver may already have rebuilt to), and never below the growth threshold of a partition
split from a moved one. While either does not hold yet, the release waits. (The loop moves the
state's offsets past transaction markers and aborted records its consumer passed over before
it asks: F is where the consumer got to, not the last record's offset plus one.)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from framework.coordination.registry import TopicEntry
from framework.kafka import KafkaConsumer
from rebalance import parent
from rebalance.positions import Position
from statestore import ProcessorDatabase

__all__ = ["children_fence", "final_offsets"]

# the processor's lines keep the loop's logger name (they were written there)
log = logging.getLogger("framework.runtime.loop")


def final_offsets(
    processor: int,
    moved: set[Position],
    *,
    database: ProcessorDatabase,
    consumer: KafkaConsumer,
    inputs: Mapping[str, TopicEntry],
    notes: set[str],
) -> dict[Position, int] | None:
    """F for each moved partition: where this processor's state ends, and never below
    the group's committed offset (T1, which the receiver may already have rebuilt to).

    ``None`` while the state is behind the group's offset (a lost or rolled-back state
    directory being rebuilt in restore mode): releasing then would hand over at an F
    below records the receiver already applied, so the release waits. Also ``None`` while
    the state has not passed the growth threshold of a child of a moved partition: below
    it the partition holds records of the child's keys, which the new owner of the
    partition neither owns nor has the state of. Why it waits is logged once (``notes``
    holds the lines already logged).
    """
    offsets = database.offsets()
    committed = consumer.committed(sorted(moved))
    final = {}
    for position in sorted(moved):
        state = offsets.get(position)
        group = committed.get(position)
        if group is not None and group > (state or 0):  # as assignment decides a rebuild
            note = f"release of {position} waits for restore to {group}"
            if note not in notes:
                notes.add(note)
                log.info(
                    "processor %d: %s[%d] is rebuilt up to %s of the group's committed %d; "
                    "it releases the partition once restored",
                    processor,
                    *position,
                    state,
                    group,
                )
            return None
        if state is None:
            held = consumer.watermarks([position])[position]
            if held.end > held.start:
                # records this state has not read (a lost directory whose group commits lag
                # its outputs): read them first, so no other processor repeats their outputs
                note = f"release of {position} waits until it is read"
                if note not in notes:
                    notes.add(note)
                    log.info(
                        "processor %d: %s[%d] has records its state has not read; it "
                        "releases the partition once they are read",
                        processor,
                        *position,
                    )
                return None
            state = held.start  # nothing to read: release where the log starts
        fence = children_fence(inputs, position)
        if state < fence:
            note = f"release of {position} waits for threshold {fence}"
            if note not in notes:
                notes.add(note)
                log.info(
                    "processor %d: %s[%d] is processed up to %d; it releases the partition "
                    "once past %d, the growth threshold of a partition split from it",
                    processor,
                    *position,
                    state,
                    fence,
                )
            return None
        final[position] = state
    return final


def children_fence(inputs: Mapping[str, TopicEntry], position: Position) -> int:
    """The largest growth threshold of a partition split from ``position`` (0 if none)."""
    topic, partition = position
    entry = inputs.get(topic)
    if entry is None:
        return 0
    history = entry.history
    return max(
        (
            offset
            for child, offset in history.thresholds.items()
            if parent(child, history.initial_partitions) == partition
        ),
        default=0,
    )
