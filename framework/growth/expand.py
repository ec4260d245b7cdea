"""``splitstate expand``: change an input topic's partition count (grow or shrink) without
breaking per-key order.

Kafka brokers know nothing of our ordering, so the fence is built from our own parts
(KIP-253 on the client side), one resumable step at a time, each recorded in the topic
registry before the next:

0. for a compacted topic only: *announce* the change (``TopicEntry.announced``: the change in
   progress, its count not recorded) and wait ``lease_ms + delivery_timeout_ms`` from that
   write. Producers write no compaction tombstone while a change is in progress, so a
   producer still on the old count either saw the announcement or placed its last record
   before announcement + lease: its tombstones (in a key's earlier homes, which after a
   shrink or a growth again include the key's new home) land before announcement + fence,
   before the count is written and so before any record placed with the new count. A
   tombstone landing after the key's new value in its home would have the log cleaner
   delete that value. A compacted input's change so waits two fences;
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
is found again (after ``fence_ends``) instead of written twice. Two runs of the same change at
once (a second terminal, a retried job) both go ahead, as a rerun does; every reader keeps the
first record of each step (``framework.coordination.entry_order``), and each run goes on from
the entry the registry kept, adopting another run's record when it came first
(``framework.growth.expand_writes``); a run that finds a later change recorded stops: its
own change is done. Kafka never removes a
partition: a shrink only records it deleted, and a later growth re-uses it (its offsets go on).
A shrink never goes below the initial count, nor below the app's processor count (then a
deleted partition's keys stay on the processor of its survivor).

Given the app's control log, the change first holds it: a ``growth`` record with a random
request id is appended, and the change goes ahead only if the state machine accepted it (no
scale in progress, no other change); a rerun adopts the unfinished change of the same topic
and count. ``growth_done`` (naming the hold's request id) releases it at the end, also when
another run finished the change; a run that fails before recording anything releases only a
hold it appended itself. So a scale and a change of a partition count exclude each other
through one conditional append, not a check followed by an act.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Literal

from framework.coordination.control_log import ControlLog
from framework.coordination.registry import (
    REGISTRY_TOPIC,
    Announcement,
    Growth,
    TopicEntry,
    TopicRegistry,
)
from framework.growth.expand_checks import ExpandError, change_noun, check_request, registered
from framework.growth.expand_markers import change_markers, write_change_markers
from framework.growth.expand_writes import elsewhere, recorded_meanwhile, write_kept
from framework.growth.hold import acquire_growth, release_growth
from framework.growth.marker_log import is_compacted
from framework.kafka import Kafka, check_retention

__all__ = ["ExpandError", "StopAfter", "expand_topic"]

_MARGIN_MS = 1000

#: where ``expand_topic(stop_after=...)`` returns early, as a crash there would: after the
#: change is announced (a compacted topic), after the count is recorded, after the fence
#: ends are, after the first marker is written (not recorded), after everything is recorded
#: in the registry (the control log not released)
StopAfter = Literal["announced", "recorded", "fenced", "marked", "unreleased"]


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
    held, mine = None, False  # (mine: appended by this run, not resumed from another)
    if control is not None:
        needed = entry.changing or partitions != entry.partitions
        noun = _noun(entry, partitions)
        held, mine = acquire_growth(control, topic, partitions, needed, report, noun=noun)
        entry = registered(registry, topic)  # as it is now that no scale can start
        try:
            check_request(kafka, entry, partitions, _processors(control))
        except ExpandError:
            release_growth(control, held if mine else None)
            raise
    wait = wait or kafka.clock.sleep
    # where this change's count is (or goes) in the history
    index = len(entry.history.counts) - (1 if entry.growth is not None else 0)
    if entry.growth is None:
        if entry.announced is None and partitions == entry.partitions:
            report(f"{topic} already has {partitions} partitions; nothing to do")
            release_growth(control, held)
            return entry
        try:
            entry = _start(
                kafka, registry, entry, partitions, report=report, wait=wait, stop_after=stop_after
            )
        except Exception:
            if mine and not registered(registry, topic).changing:
                release_growth(control, held)  # nothing was written: a scale may go ahead
            raise  # (a resumed hold: the run that holds it may still be going on)
    else:
        report(f"resuming the {_noun(entry, partitions)} of {topic} to {partitions} partitions")
    if stop_after in ("announced", "recorded"):
        return entry
    entry, stopped = _fence_and_mark(
        kafka, registry, entry, (index, partitions), report=report, wait=wait, stop_after=stop_after
    )
    if not stopped:  # done, by this run or another (its request id: no other hold ends)
        release_growth(control, held)
    return entry


def _fence_and_mark(
    kafka: Kafka,
    registry: TopicRegistry,
    entry: TopicEntry,
    change: tuple[int, int],
    *,
    report: Callable[[str], None],
    wait: Callable[[float], None],
    stop_after: StopAfter | None,
) -> tuple[TopicEntry, bool]:
    """Steps 2 to 5 of the change to ``change[1]`` partitions (at ``counts[change[0]]``),
    unless it is finished; the entry, and whether ``stop_after`` stopped it."""
    index, partitions = change
    if _finished(entry, index, partitions, report):
        return entry, False
    entry = _fence(kafka, registry, entry, report, wait)
    if stop_after == "fenced":
        return entry, True
    if _finished(entry, index, partitions, report):
        return entry, False
    entry = _mark(kafka, registry, entry, report, stop_after == "marked")
    return entry, stop_after in ("marked", "unreleased")


def _finished(
    entry: TopicEntry, index: int, partitions: int, report: Callable[[str], None]
) -> bool:
    """Whether the change is finished for this run: done (by another run), or the registry
    went past it (``expand_writes.elsewhere``)."""
    if elsewhere(entry, index, partitions):
        counts = " -> ".join(str(c) for c in entry.history.counts)
        report(
            f"another run went past this change of {entry.topic}: the registry records "
            f"{counts}{' (a change in progress)' if entry.changing else ''}; stopping here"
        )
        return True
    return entry.growth is None


def _processors(control: ControlLog | None) -> int | None:
    """The app's processor count in force (``None``: no control log, the app never ran, or
    a scale is in progress: then holding the log refuses the change, naming the scale)."""
    if control is None:
        return None
    state = control.read()
    return None if state.scaling is not None else state.processors


def _noun(entry: TopicEntry, partitions: int) -> str:
    """``"growth"`` or ``"shrink"``: the change in progress, else the one asked for."""
    change = entry.growth or entry.announced
    if change is not None:
        return change_noun(change.kind)
    return "shrink" if partitions < entry.partitions else "growth"


def _start(
    kafka: Kafka,
    registry: TopicRegistry,
    entry: TopicEntry,
    partitions: int,
    *,
    report: Callable[[str], None],
    wait: Callable[[float], None],
    stop_after: StopAfter | None,
) -> TopicEntry:
    """Steps 0 and 1, from a registry that records no change (it may announce one); or the
    entry kept when another run went further meanwhile."""
    counts = len(entry.history.counts)
    if entry.announced is not None:
        noun = _noun(entry, partitions)
        report(f"resuming the {noun} of {entry.topic} to {partitions} partitions (announced)")
    elif entry.compacted or is_compacted(kafka, entry.topic):
        entry = _announce(kafka, registry, entry, partitions, report)
        if stop_after == "announced":
            return entry
    if len(entry.history.counts) > counts:
        return entry  # recorded by another run meanwhile
    if entry.announced is not None:
        if entry.announced.partitions != partitions:
            return entry  # another change was announced first (``_finished`` says so)
        _wait_fence(kafka, entry, entry.announced.announced_ms, report, wait)
    return _record(kafka, registry, entry, partitions, report)


def _announce(
    kafka: Kafka,
    registry: TopicRegistry,
    entry: TopicEntry,
    partitions: int,
    report: Callable[[str], None],
) -> TopicEntry:
    """Step 0 (a compacted topic): the change announced, its count not recorded; or the
    announcement (or record) of another run of the same change, read again just before
    writing (``_meanwhile``)."""
    topic = entry.topic
    kind: Literal["grow", "shrink"] = "grow" if partitions > entry.partitions else "shrink"
    adopted = recorded_meanwhile(registry, topic, (len(entry.history.counts) + 1, 0))
    if adopted is not None:
        report(f"the {change_noun(kind)} of {topic} to {partitions} was announced by another run")
        return adopted
    announced = Announcement(partitions, kind, int(kafka.clock.time() * 1000))
    entry = write_kept(registry, replace(entry, compacted=True, announced=announced), report)
    if entry.announced != announced:
        return entry
    report(
        f"announced the {change_noun(kind)} of {topic} to {partitions} partitions (a compacted "
        f"input: producers stop writing compaction tombstones within their lease "
        f"({entry.lease_ms} ms), before the count is recorded)"
    )
    return entry


def _wait_fence(
    kafka: Kafka,
    entry: TopicEntry,
    since_ms: int,
    report: Callable[[str], None],
    wait: Callable[[float], None],
) -> None:
    """Wait until ``since_ms`` (a registry write) plus the producers' lease and delivery
    timeout (and a margin) passed: by then every producer that did not see that write
    placed its last record before it and had it delivered or failed."""
    wait_ms = since_ms + entry.fence_ms + _MARGIN_MS - int(kafka.clock.time() * 1000)
    if wait_ms > 0:
        report(
            f"waiting {wait_ms / 1000:.1f}s: producers' lease ({entry.lease_ms} ms) plus their "
            f"delivery timeout ({entry.delivery_timeout_ms} ms)"
        )
        wait(wait_ms / 1000)


def _record(
    kafka: Kafka,
    registry: TopicRegistry,
    entry: TopicEntry,
    partitions: int,
    report: Callable[[str], None],
) -> TopicEntry:
    """Step 1: the new count, what the step needs from before it, and the change in
    progress, in one registry write; or, when another run recorded this change after
    ``entry`` was read, that run's record (``_meanwhile``)."""
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
    adopted = recorded_meanwhile(registry, topic, (len(history.counts), 1))
    if adopted is not None:
        report(f"the {kind} of {topic} to {partitions} partitions was recorded by another run")
        return adopted
    compacted = entry.compacted or is_compacted(kafka, topic)  # (before the time is taken)
    change = Growth(partitions, int(kafka.clock.time() * 1000), kind=kind)
    entry = replace(entry, history=history, growth=change, compacted=compacted, announced=None)
    kept = write_kept(registry, entry, report)
    if kept != entry:
        return kept
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
    """Each of ``partitions``' end offset now: its high watermark, asked ``read_uncommitted``.
    Not the last stable offset (what a ``read_committed`` consumer is told): under a
    transaction still open it lies below records already written (a late record, a marker
    of the step before), and a start, hold or fence end measured there would take them as
    written after it."""
    positions = [(topic, p) for p in partitions]
    with kafka.consumer("splitstate-expand", isolation="read_uncommitted") as consumer:
        offsets = consumer.watermarks(positions)
    return {p: offsets[(topic, p)].end for _t, p in positions}


def _offsets(offsets: Mapping[int, int]) -> str:
    return " ".join(f"{p}@{o}" for p, o in sorted(offsets.items()))


def _fence(
    kafka: Kafka,
    registry: TopicRegistry,
    entry: TopicEntry,
    report: Callable[[str], None],
    wait: Callable[[float], None],
) -> TopicEntry:
    """Steps 2 and 3: wait out the producers' lease and delivery timeout, then record the end
    offset of each partition a marker goes to (or adopt those another run recorded
    meanwhile: ``_meanwhile``)."""
    change = entry.growth
    assert change is not None
    if change.fence_ends is not None:
        return entry
    _wait_fence(kafka, entry, change.recorded_ms, report, wait)
    fenced = sorted({marker.partition for marker in change_markers(entry)})
    ends = _ends(kafka, entry.topic, fenced)
    adopted = recorded_meanwhile(registry, entry.topic, (len(entry.history.counts), 2))
    if adopted is not None:  # its markers lie after its fence ends: found, not written again
        report(f"the fence ends of {entry.topic} were recorded by another run")
        return adopted
    return write_kept(registry, replace(entry, growth=replace(change, fence_ends=ends)), report)


def _mark(
    kafka: Kafka,
    registry: TopicRegistry,
    entry: TopicEntry,
    report: Callable[[str], None],
    stop_after_one: bool,
) -> TopicEntry:
    """Steps 4 and 5: find or write each marker, then record them and clear the change (or
    adopt the record of another run that finished it meanwhile: ``_meanwhile``)."""
    change = entry.growth
    assert change is not None
    written = write_change_markers(kafka, entry, report, stop_after_one)
    if written is None:
        return entry
    topic, history = entry.topic, entry.history
    adopted = recorded_meanwhile(registry, topic, (len(history.counts), 3))
    if adopted is not None:
        report(f"the markers of {topic} were recorded by another run")
        return adopted
    if change.kind == "shrink":
        history = history.with_drains(written)
        done = f"drain markers recorded; deleted: {_listed(history.deleted())}"
    else:
        history = history.with_markers(written)
        done = "thresholds recorded"
    entry = replace(entry, history=history, growth=None)
    kept = write_kept(registry, entry, report)
    if kept != entry:
        return kept
    counts = " -> ".join(str(c) for c in history.counts)
    report(f"{topic} now has {history.partitions} partitions ({counts}); {done}")
    return entry


def _listed(partitions: range) -> str:
    return ", ".join(str(p) for p in partitions) or "none"
