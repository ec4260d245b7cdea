"""``splitstate expand``: change an input topic's partition count (grow or shrink) without
breaking per-key order.

Kafka brokers know nothing of our ordering, so the fence is built from our own parts
(KIP-253 on the client side), one resumable step at a time, each recorded in the topic
registry before the next:

1. record the new count with the time it was recorded, in one registry write with what the
   step needs from before it (``Grow.starts``: each grown partition's end offset, after the
   partitions Kafka lacks are created; ``Shrink.holds``: each survivor's end offset), and the
   change in progress (``Growth``, of kind ``grow`` or ``shrink``); producers switch to the new
   count within their registry lease;
2. wait ``lease_ms + delivery_timeout_ms``: after that no record placed with the old count
   can still land;
3. record the end offset of each partition a marker goes to (``fence_ends``): a growth's
   parents, a shrink's deleted partitions;
4. append the markers (``framework.growth.markers``): a growth marker to the parent of each
   grown partition (its offset is where the child's keys end in the parent), a drain marker
   to each deleted partition (its offset bounds the records of that partition's life);
5. record the markers' offsets in the step and clear the change.

A crash at any point is resumed by running the same command again: a marker already written
is found again (after ``fence_ends``) instead of written twice. Kafka never removes a
partition: a shrink only records it deleted, and a later growth re-uses it (its offsets go on).
A shrink never goes below the initial count, nor below the app's processor count (then a
deleted partition's keys stay on the processor of its survivor).

Given the app's control log, the change first holds it: a ``growth`` record with a random
request id is appended, and the change goes ahead only if the state machine accepted it (no
scale in progress, no other change); a rerun adopts the unfinished change of the same topic
and count. ``growth_done`` releases it at the end. So a scale and a change of a partition
count exclude each other through one conditional append, not a check followed by an act.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Literal

from framework.coordination.control_log import ControlLog
from framework.coordination.registry import REGISTRY_TOPIC, Growth, TopicEntry, TopicRegistry
from framework.growth.expand_checks import ExpandError, change_noun, check_request, registered
from framework.growth.hold import hold_growth, release_growth
from framework.growth.marker_log import find_marker, is_compacted, write_marker
from framework.growth.markers import MarkerName, marker_step
from framework.kafka import Kafka, check_retention
from rebalance import Grow, Shrink, TopicHistory, parent

__all__ = ["ExpandError", "StopAfter", "expand_topic"]

_MARGIN_MS = 1000

#: where ``expand_topic(stop_after=...)`` returns early, as a crash there would: after the
#: count is recorded, after the fence ends are, after the first marker is written (not
#: recorded), after everything is recorded in the registry (the control log not released)
StopAfter = Literal["recorded", "fenced", "marked", "unreleased"]


def expand_topic(
    kafka: Kafka,
    topic: str,
    partitions: int,
    *,
    control: ControlLog | None = None,
    report: Callable[[str], None] = print,
    wait: Callable[[float], None] | None = None,
    stop_after: StopAfter | None = None,
) -> TopicEntry:
    """Change ``topic`` to ``partitions`` (or finish a change in progress); returns the entry.

    ``kafka``: the port to the topic's cluster; ``control``: the control log of the app whose
    input ``topic`` is; the change holds it (no scale meanwhile), and a shrink below the
    app's processor count is refused. ``wait(seconds)`` waits out the producers' lease and
    delivery timeout (default ``kafka.clock.sleep``; the CLI shows a countdown).
    ``stop_after`` returns early after that step, as a crash would (for tests of resuming).
    """
    registry = TopicRegistry(kafka)
    if control is not None:
        control.ensure_topic()
    check_retention(kafka, [REGISTRY_TOPIC] + ([control.topic] if control else []))
    entry = registered(registry, topic)
    check_request(kafka, entry, partitions, _processors(control))
    held = None
    if control is not None:
        needed = entry.growth is not None or partitions != entry.partitions
        noun = _noun(entry, partitions)
        held = hold_growth(control, topic, partitions, needed, report, noun=noun)
        entry = registered(registry, topic)  # as it is now that no scale can start
        try:
            check_request(kafka, entry, partitions, _processors(control))
        except ExpandError:
            release_growth(control, held)
            raise
    if entry.growth is None:
        if partitions == entry.partitions:
            report(f"{topic} already has {partitions} partitions; nothing to do")
            release_growth(control, held)
            return entry
        try:
            entry = _record(kafka, registry, entry, partitions, report)
        except Exception:
            if registered(registry, topic).growth is None:
                release_growth(control, held)  # nothing was recorded: a scale may go ahead
            raise
    else:
        report(f"resuming the {_noun(entry, partitions)} of {topic} to {partitions} partitions")
    if stop_after == "recorded":
        return entry
    entry = _fence(kafka, registry, entry, report, wait or kafka.clock.sleep)
    if stop_after == "fenced":
        return entry
    entry = _mark(kafka, registry, entry, report, stop_after == "marked")
    if stop_after in ("marked", "unreleased"):
        return entry
    release_growth(control, held)
    return entry


def _processors(control: ControlLog | None) -> int | None:
    """The app's processor count in force (``None``: no control log, the app never ran, or
    a scale is in progress: then holding the log refuses the change, naming the scale)."""
    if control is None:
        return None
    state = control.read()
    return None if state.scaling is not None else state.processors


def _noun(entry: TopicEntry, partitions: int) -> str:
    """``"growth"`` or ``"shrink"``: the change in progress, else the one asked for."""
    if entry.growth is not None:
        return change_noun(entry.growth.kind)
    return "shrink" if partitions < entry.partitions else "growth"


def _record(
    kafka: Kafka,
    registry: TopicRegistry,
    entry: TopicEntry,
    partitions: int,
    report: Callable[[str], None],
) -> TopicEntry:
    """Step 1: the new count, what the step needs from before it, and the change in
    progress, in one registry write."""
    topic, history = entry.topic, entry.history
    before, created = history.partitions, history.created
    if partitions > before:
        actual = kafka.partition_counts([topic]).get(topic, 0)
        if actual < partitions:
            kafka.create_partitions(topic, partitions)
            report(f"created partitions {actual}..{partitions - 1} of {topic}")
        starts = _ends(kafka, topic, range(before, partitions))  # before the count is recorded
        history = history.grown(partitions, starts)
        kind: Literal["grow", "shrink"] = "grow"
    else:
        holds = _ends(kafka, topic, history.survivors(partitions))
        history = history.shrunk(partitions, holds)
        kind = "shrink"
    change = Growth(partitions, int(kafka.clock.time() * 1000), kind=kind)
    compacted = entry.compacted or is_compacted(kafka, topic)
    entry = replace(entry, history=history, growth=change, compacted=compacted)
    registry.write(entry)
    switch = f"producers switch within their lease ({entry.lease_ms} ms)"
    if kind == "grow":
        reused = {c: o for c, o in starts.items() if c < created}
        again = f" (re-used, from {_offsets(reused)})" if reused else ""
        report(f"recorded {topic}: {before} -> {partitions} partitions{again}; {switch}")
    else:
        report(
            f"shrink {topic} {before} -> {partitions}: recorded (holds: {_offsets(holds)}); "
            f"{switch}"
        )
    return entry


def _ends(kafka: Kafka, topic: str, partitions: Iterable[int]) -> dict[int, int]:
    """Each of ``partitions``' end offset now."""
    positions = [(topic, p) for p in partitions]
    with kafka.consumer("splitstate-expand") as consumer:
        offsets = consumer.watermarks(positions)
    return {p: offsets[(topic, p)].end for _t, p in positions}


def _offsets(offsets: Mapping[int, int]) -> str:
    return " ".join(f"{p}@{o}" for p, o in sorted(offsets.items()))


@dataclass(frozen=True)
class _Marker:
    """One marker the change in progress writes: to ``topic[partition]``, about ``subject``
    (a grown child, or the deleted partition itself), as ``name``."""

    partition: int
    subject: int
    name: MarkerName


def _markers(entry: TopicEntry) -> list[_Marker]:
    """The markers of the change in progress (the history's last step), by subject."""
    history = entry.history
    step = history.last_step
    index = len(history.counts) - 1
    before = history.counts[-2]
    if isinstance(step, Shrink):
        return [
            _Marker(d, d, MarkerName(step.count, d, index, drain=True))
            for d in range(step.count, before)
        ]
    assert isinstance(step, Grow)
    return [
        _Marker(_parent(c, history.initial_partitions), c, MarkerName(step.count, c, index))
        for c in range(before, step.count)
    ]


def _parent(child: int, initial: int) -> int:
    found = parent(child, initial)
    assert found is not None  # grown partitions are never initial partitions
    return found


def _fence(
    kafka: Kafka,
    registry: TopicRegistry,
    entry: TopicEntry,
    report: Callable[[str], None],
    wait: Callable[[float], None],
) -> TopicEntry:
    """Steps 2 and 3: wait out the producers' lease and delivery timeout, then record the end
    offset of each partition a marker goes to."""
    change = entry.growth
    assert change is not None
    if change.fence_ends is not None:
        return entry
    wait_ms = change.recorded_ms + entry.fence_ms + _MARGIN_MS - int(kafka.clock.time() * 1000)
    if wait_ms > 0:
        report(
            f"waiting {wait_ms / 1000:.1f}s: producers' lease ({entry.lease_ms} ms) plus their "
            f"delivery timeout ({entry.delivery_timeout_ms} ms)"
        )
        wait(wait_ms / 1000)
    fenced = sorted({marker.partition for marker in _markers(entry)})
    ends = _ends(kafka, entry.topic, fenced)
    entry = replace(entry, growth=replace(change, fence_ends=ends))
    registry.write(entry)
    return entry


def _mark(
    kafka: Kafka,
    registry: TopicRegistry,
    entry: TopicEntry,
    report: Callable[[str], None],
    stop_after_one: bool,
) -> TopicEntry:
    """Steps 4 and 5: find or write each marker, then record them and clear the change."""
    change = entry.growth
    assert change is not None
    written = _write_markers(kafka, entry, report, stop_after_one)
    if written is None:
        return entry
    topic, history = entry.topic, entry.history
    if change.kind == "shrink":
        history = history.with_drains(written)
        done = f"drain markers recorded; deleted: {_listed(history.deleted())}"
    else:
        history = history.with_markers(written)
        done = "thresholds recorded"
    entry = replace(entry, history=history, growth=None)
    registry.write(entry)
    counts = " -> ".join(str(c) for c in history.counts)
    report(f"{topic} now has {history.partitions} partitions ({counts}); {done}")
    return entry


def _write_markers(
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
        for marker in _markers(entry):
            start = change.fence_ends[marker.partition]
            ids = _accepted_ids(topic, entry.history, marker.name)
            found = find_marker(kafka, topic, marker.partition, start, ids)
            if found is None:
                marker_id = marker.name.marker_id(topic)
                found = write_marker(
                    producer, topic, marker.partition, marker_id, marker.subject,
                    compacted=compacted,
                )  # fmt: skip
                if stop_after_one:
                    return None
            written[marker.subject] = found
            what = "drain marker" if marker.name.drain else "marker"
            report(f"{what} for partition {marker.subject} at {topic}[{marker.partition}]@{found}")
    finally:
        producer.close()
    return written


def _accepted_ids(topic: str, history: TopicHistory, name: MarkerName) -> set[str]:
    """The ids a marker of the step in progress may carry: its own, and for a growth recorded
    before ids named their step (``expand`` of an older splitstate stopped midway), the id
    without the step."""
    ids = {name.marker_id(topic)}
    old = MarkerName(name.count, name.partition)
    if not name.drain and marker_step(history, old) == name.step:
        ids.add(old.marker_id(topic))
    return ids


def _listed(partitions: range) -> str:
    return ", ".join(str(p) for p in partitions) or "none"
