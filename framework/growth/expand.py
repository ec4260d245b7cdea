"""``splitstate expand``: grow an input topic's partitions without breaking per-key order.

Kafka brokers know nothing of our ordering, so the fence is built from our own parts
(KIP-253 on the client side), one resumable step at a time, each recorded in the topic
registry before the next:

1. create the partitions (admin API) and record the new count with the time it was recorded
   (``Growth``); producers switch to it within their registry lease;
2. wait ``lease_ms + delivery_timeout_ms``: after that no record placed with the old count
   can still land in a parent partition;
3. record each parent's end offset (``fence_ends``);
4. append a marker record (no key, header ``splitstate.marker``) to each parent of a new
   partition; its offset becomes the child's threshold: the child's keys have no record in
   the parent after it;
5. record the thresholds and clear the growth.

A crash at any point is resumed by running the same command again: a marker already written
is found again (after ``fence_ends``) instead of written twice. Processors deliver nothing from
a new partition until their position on its parent has passed the threshold.

Given the app's control log, the growth first holds it: a ``growth`` record with a random
request id is appended, and the growth goes ahead only if the state machine accepted it (no
scale in progress, no other growth); a rerun adopts the unfinished growth of the same topic
and count. ``growth_done`` releases it at the end. So a scale and a growth exclude each other
through one conditional append, not a check followed by an act.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import orjson

from framework.coordination.control_log import ControlLog
from framework.coordination.registry import REGISTRY_TOPIC, Growth, TopicEntry, TopicRegistry
from framework.growth.hold import ExpandError, hold_growth, release_growth
from framework.growth.markers import MARKER_HEADER
from framework.kafka import DeliveryError, Kafka, KafkaProducer, Message, check_retention
from framework.records import readable_headers
from rebalance import TopicHistory, parent

__all__ = ["ExpandError", "expand_topic"]

_MARGIN_MS = 1000


def expand_topic(
    kafka: Kafka,
    topic: str,
    partitions: int,
    *,
    control: ControlLog | None = None,
    report: Callable[[str], None] = print,
    wait: Callable[[float], None] | None = None,
    stop_after: str | None = None,
) -> TopicEntry:
    """Grow ``topic`` to ``partitions`` (or finish a growth in progress); returns the entry.

    ``kafka``: the port to the topic's cluster; ``control``: the control log of the app whose
    input ``topic`` is; the growth holds it (no scale meanwhile). ``wait(seconds)`` waits out
    the producers' lease and delivery timeout (default ``kafka.clock.sleep``; the CLI shows a
    countdown). ``stop_after``
    (``"recorded"`` or ``"fenced"``) returns early after that step, as a crash would (for
    tests of resuming).
    """
    registry = TopicRegistry(kafka)
    if control is not None:
        control.ensure_topic()
    check_retention(kafka, [REGISTRY_TOPIC] + ([control.topic] if control else []))
    entry = _registered(registry, topic)
    _check_request(kafka, entry, partitions)
    held = None
    if control is not None:
        needed = entry.growth is not None or partitions != entry.partitions
        held = hold_growth(control, topic, partitions, needed, report)
        entry = _registered(registry, topic)  # as it is now that no scale can start
        try:
            _check_request(kafka, entry, partitions)
        except ExpandError:
            release_growth(control, held)
            raise
    if entry.growth is None:
        if partitions == entry.partitions:
            report(f"{topic} already has {partitions} partitions; nothing to do")
            release_growth(control, held)
            return entry
        try:
            entry = _record_growth(kafka, registry, entry, partitions, report)
        except Exception:
            if _registered(registry, topic).growth is None:
                release_growth(control, held)  # nothing was recorded: a scale may go ahead
            raise
    else:
        report(f"resuming the growth of {topic} to {partitions} partitions")
    if stop_after == "recorded":
        return entry
    entry = _fence(kafka, registry, entry, report, wait or kafka.clock.sleep)
    if stop_after == "fenced":
        return entry
    entry = _mark(kafka, registry, entry, report)
    release_growth(control, held)
    return entry


def _registered(registry: TopicRegistry, topic: str) -> TopicEntry:
    entry = registry.read().get(topic)
    if entry is None:
        raise ExpandError(
            f"topic {topic!r} is not in the splitstate topic registry. Fix: create it with "
            "`splitstate topics create MODULE:APP` (or start its app once) before growing it."
        )
    return entry


def _check_request(kafka: Kafka, entry: TopicEntry, partitions: int) -> None:
    """Refuse a growth the registry and Kafka cannot take, before anything is written."""
    topic = entry.topic
    if entry.growth is not None:
        if entry.growth.partitions != partitions:
            raise ExpandError(
                f"a growth of {topic!r} to {entry.growth.partitions} partitions is in "
                f"progress. Fix: finish it first (`splitstate expand ... --topic {topic} "
                f"--partitions {entry.growth.partitions}`), then grow further."
            )
        return
    if partitions == entry.partitions:
        return  # nothing to grow
    if partitions < entry.partitions:
        raise ExpandError(
            f"{topic!r} has {entry.partitions} partitions; partitions can only grow. Fix: ask "
            f"for more than {entry.partitions}."
        )
    actual = kafka.partition_counts([topic]).get(topic, 0)
    if actual > partitions:
        raise ExpandError(
            f"{topic!r} already has {actual} partitions in Kafka (added outside `splitstate "
            f"expand`), more than the {partitions} asked for. Fix: expand to at least {actual}."
        )


def _record_growth(
    kafka: Kafka,
    registry: TopicRegistry,
    entry: TopicEntry,
    partitions: int,
    report: Callable[[str], None],
) -> TopicEntry:
    topic = entry.topic
    actual = kafka.partition_counts([topic]).get(topic, 0)
    if actual < partitions:
        kafka.create_partitions(topic, partitions)
        report(f"created partitions {actual}..{partitions - 1} of {topic}")
    history = TopicHistory.of(topic, [*entry.history.counts, partitions], entry.history.thresholds)
    growth = Growth(partitions, int(kafka.clock.time() * 1000))
    entry = replace(entry, history=history, growth=growth)
    registry.write(entry)
    report(
        f"recorded {topic}: {entry.history.counts[-2]} -> {partitions} partitions; producers "
        f"switch within their lease ({entry.lease_ms} ms)"
    )
    return entry


def _children(entry: TopicEntry) -> dict[int, int]:
    """Each partition the growth in progress creates, with its parent."""
    history = entry.history
    before = history.counts[-2]
    return {c: _parent(c, history.initial_partitions) for c in range(before, history.partitions)}


def _parent(child: int, initial: int) -> int:
    found = parent(child, initial)
    assert found is not None  # children of a growth are never initial partitions
    return found


def _fence(
    kafka: Kafka,
    registry: TopicRegistry,
    entry: TopicEntry,
    report: Callable[[str], None],
    wait: Callable[[float], None],
) -> TopicEntry:
    growth = entry.growth
    assert growth is not None
    if growth.fence_ends is not None:
        return entry
    wait_ms = growth.recorded_ms + entry.fence_ms + _MARGIN_MS - int(kafka.clock.time() * 1000)
    if wait_ms > 0:
        report(
            f"waiting {wait_ms / 1000:.1f}s: producers' lease ({entry.lease_ms} ms) plus their "
            f"delivery timeout ({entry.delivery_timeout_ms} ms)"
        )
        wait(wait_ms / 1000)
    parents = sorted(set(_children(entry).values()))
    with kafka.consumer("splitstate-expand") as consumer:
        offsets = consumer.watermarks([(entry.topic, p) for p in parents])
    ends = {p: offsets[(entry.topic, p)].end for p in parents}
    entry = replace(entry, growth=replace(growth, fence_ends=ends))
    registry.write(entry)
    return entry


def _mark(
    kafka: Kafka,
    registry: TopicRegistry,
    entry: TopicEntry,
    report: Callable[[str], None],
) -> TopicEntry:
    growth = entry.growth
    assert growth is not None and growth.fence_ends is not None
    topic = entry.topic
    markers = dict(growth.markers)
    producer = kafka.producer()
    for child, parent_partition in sorted(_children(entry).items()):
        if child in markers:
            continue
        marker_id = f"{topic}/{growth.partitions}/{child}"
        found = _find_marker(
            kafka, topic, parent_partition, growth.fence_ends[parent_partition], marker_id
        )
        markers[child] = (
            found
            if found is not None
            else _write_marker(producer, topic, parent_partition, child, marker_id)
        )
        report(f"marker for partition {child} at {topic}[{parent_partition}]@{markers[child]}")
    thresholds = {**entry.history.thresholds, **markers}
    history = TopicHistory.of(topic, entry.history.counts, thresholds)
    entry = replace(entry, history=history, growth=None)
    registry.write(entry)
    report(f"{topic} now has {history.partitions} partitions; thresholds recorded")
    return entry


def _write_marker(
    producer: KafkaProducer, topic: str, partition: int, child: int, marker_id: str
) -> int:
    delivered: list[Message] = []
    errors: list[DeliveryError] = []

    def on_delivery(error: DeliveryError | None, message: Message) -> None:
        if error is not None:
            errors.append(error)
        else:
            delivered.append(message)

    producer.produce(
        topic,
        orjson.dumps({"splitstate_marker": marker_id, "child": child}),
        None,
        partition,
        headers=[(MARKER_HEADER, marker_id.encode())],
        on_delivery=on_delivery,
    )
    producer.flush(60)
    if errors or not delivered:
        raise ExpandError(
            f"could not write the marker to {topic}[{partition}]: {errors[:1] or 'timed out'}. "
            "Fix: check the broker, then run the same `splitstate expand` again (it resumes)."
        )
    offset = delivered[0].offset()
    assert offset is not None
    return offset


def _find_marker(
    kafka: Kafka, topic: str, partition: int, start: int, marker_id: str
) -> int | None:
    """The offset of marker ``marker_id`` in ``topic[partition]`` at or after ``start``
    (``None`` when retention deleted it: a new marker is as good, the fence held since).
    The partition's end may lie past its last record (transaction markers, aborted records
    of a transactional producer): the search ends where the consumer got there."""
    position = (topic, partition)
    with kafka.consumer("splitstate-expand") as consumer:
        retained = consumer.watermarks([position])[position]
        high, start = retained.end, max(start, retained.start)
        if high <= start:
            return None
        consumer.assign({position: start})
        deadline = kafka.clock.monotonic() + 60
        while kafka.clock.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                headers = readable_headers(message) or ()
                if (MARKER_HEADER, marker_id.encode()) in headers:
                    return message.offset()
                offset = message.offset()
                if offset is not None and offset + 1 >= high:
                    return None
            reached = consumer.position(position)
            if reached is not None and reached >= high:
                return None
        return None
