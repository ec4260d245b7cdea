"""A growth child's base computed from its parent's history (``splitstate order base``).

Under ``time.input_order: canonical`` a growth child read from its life's start waits for its
*base*, its parent's mark at its growth marker (``framework.runtime.growth_bases``), which
whoever reads the parent past the marker publishes. A parent read past the marker under
``arrival``, or by a splitstate before ``growth_base`` records, published none: the child
waits for ever. ``base_from_history`` computes the base as the live loop and the Spark build
(``framework.bootstrap.order_marks.child_bases``) do: the running max of the event times
(``InputTimes``, ticks' floors included) of the parent's life from its start up to and
including the marker as the registry records it, at least the parent's own base (a growth
child's: recorded, else computed so, recursively). It reads what a ``read_committed``
consumer reads (the live loop's view). The parent's history must reach back to its life's
start: when Kafka no longer holds it, ``GrowthBaseError`` says so and names the fix.
"""

from __future__ import annotations

from collections.abc import Callable

from framework.coordination.registry import TopicEntry
from framework.errors import SplitstateError
from framework.input_times import InputTimes
from framework.kafka import KafkaConsumer
from framework.order import NO_FLOOR, PartitionMark
from rebalance import Grow, TopicHistory, parent

__all__ = ["GrowthBaseError", "Recorded", "base_from_history", "child_life"]

#: the base the control log records for a life ``(topic, partition, start)``, if any
Recorded = Callable[[str, int, int], int | None]
#: empty reads in a row after which the history is taken as not readable
_EMPTY_READS = 50


class GrowthBaseError(SplitstateError):
    """A growth child's base cannot be computed from its parent's history (the message says
    why and the fix)."""


def child_life(history: TopicHistory, child: int) -> tuple[int, int, int | None] | None:
    """``child``'s last growth life in ``history``: ``(its start, its parent, its marker's
    offset in the parent as the registry records it, ``None``: not yet)``; ``None``: not a
    growth child."""
    grown = [step for step in history.steps if isinstance(step, Grow) and child in step.starts]
    source = parent(child, history.initial_partitions)
    if not grown or source is None:
        return None
    step = grown[-1]
    return step.starts[child], source, step.markers.get(child)


def base_from_history(
    consumer: KafkaConsumer,
    times: InputTimes,
    entry: TopicEntry,
    child: int,
    recorded: Recorded,
    *,
    timeout: float = 1.0,
) -> tuple[int, int]:
    """``(the start of child's last life, its base)`` computed from its parent's history in
    Kafka through ``consumer`` (assigned here), with the app's event-time rule ``times``;
    the parent's own base as ``recorded`` or computed so. ``GrowthBaseError`` when the
    child's marker is not recorded, or Kafka no longer holds the parent's life from its
    start."""
    history = entry.history
    topic = history.name
    life = child_life(history, child)
    if life is None:
        raise GrowthBaseError(f"{topic}[{child}] is not a growth child in the topic registry")
    start, source, marker = life
    if marker is None:
        raise GrowthBaseError(
            f"{topic}[{child}]'s growth marker in {topic}[{source}] is not recorded yet: its "
            f"base is not known before it is. Fix: run `splitstate expand` again to record it, "
            "then this command"
        )
    source_start, own_base = _parent_life(
        consumer, times, entry, source, marker=marker, recorded=recorded
    )
    position = (topic, source)
    held = consumer.watermarks([position])[position]
    if held.start > source_start or held.end <= marker:
        raise GrowthBaseError(
            f"Kafka holds {topic}[{source}] from offset {held.start} to {held.end}: the base "
            f"of {topic}[{child}] needs it from its life's start ({source_start}) to the "
            f"marker ({marker}), which retention deleted. Fix: publish the base the "
            "parent's history had, computed from a copy of it (the Spark build's "
            "`child_bases` over a backfill source that reaches the parent's life start), "
            f"with `splitstate order base APP --topic {topic} --partition {child} --base N`"
        )
    return start, max(
        own_base,
        _mark_at(consumer, times, position, start=source_start, marker=marker, timeout=timeout),
    )


def _parent_life(
    consumer: KafkaConsumer,
    times: InputTimes,
    entry: TopicEntry,
    source: int,
    *,
    marker: int,
    recorded: Recorded,
) -> tuple[int, int]:
    """The parent's life holding ``marker``: ``(its start, its base)`` (an initial
    partition's first life: ``(0, NO_FLOOR)``)."""
    history = entry.history
    lives = [
        step.starts[source]
        for step in history.steps
        if isinstance(step, Grow) and source in step.starts and step.starts[source] <= marker
    ]
    if not lives:
        return 0, NO_FLOOR
    start = lives[-1]
    base = recorded(history.name, source, start)
    if base is None:
        found_start, base = base_from_history(consumer, times, entry, source, recorded)
        if found_start != start:
            raise GrowthBaseError(
                f"{history.name}[{source}] lived again since {history.name}[{marker}]'s "
                "marker: its base then is not recorded and cannot be computed here"
            )
    return start, base


def _mark_at(
    consumer: KafkaConsumer,
    times: InputTimes,
    position: tuple[str, int],
    *,
    start: int,
    marker: int,
    timeout: float,
) -> int:
    """The running max of the event times of ``position`` from ``start`` up to and including
    ``marker`` (``NO_FLOOR``: none)."""
    topic, partition = position
    consumer.assign({position: start})
    mark, empty = PartitionMark(), 0
    while True:
        messages = consumer.consume(500, timeout)
        for message in messages:
            offset = message.offset()
            if offset is None or offset > marker:
                continue
            mark.read(times.of(topic, partition, offset, message))
        at = consumer.position(position)
        if at is not None and at > marker:
            return mark.value
        empty = 0 if messages else empty + 1
        if empty >= _EMPTY_READS:
            raise GrowthBaseError(
                f"{topic}[{partition}] was not read up to offset {marker} (read to {at}): "
                "is a transaction still open? Fix: run this command again later"
            )
