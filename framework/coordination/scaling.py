"""Asking for a new processor count: the ``scale`` record that starts a generation.

The request is a conditional append: it carries a random request id, and after writing it
the asker reads the log back and reports success only if the state machine accepted *its*
record. Of two racing requests the first in log order wins; the other is ignored by every
reader and its asker is told why. A growth (``splitstate expand``) holds the same log, so a
scale and a growth never overlap.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from framework.app import App
from framework.config import ConfigError
from framework.coordination.control_log import ControlLog
from framework.coordination.progress_reports import ProcessorReport, read_reports
from framework.coordination.registry import (
    REGISTRY_TOPIC,
    RegistryEntries,
    TopicEntry,
    TopicRegistry,
)
from framework.errors import SplitstateError
from framework.kafka import Clients, Kafka, check_retention, watermarks
from rebalance import check_layout, plan_scale
from rebalance.control import ControlState, Scale, abort_record, history_record
from rebalance.control_stops import Stop, resumed_record

__all__ = ["abort_scale", "read_control", "request_scale", "resume_scale"]

#: a receiver's progress report older than this says nothing of whether it runs now
_REPORT_FRESH_SECONDS = 90.0


def read_control(app: App, kafka: Kafka | None = None) -> ControlState:
    """The app's control state, read from its control log (through ``kafka``, by default
    the clients of the app's config)."""
    config = app.config
    return ControlLog(Clients.of(config) if kafka is None else kafka, config.control_topic).read()


def request_scale(app: App, processors: int, kafka: Kafka | None = None) -> Scale:
    """Start a scale to ``processors``; ``ConfigError`` naming the reason when it cannot be.

    ``kafka``: the port to the app's cluster (by default the clients of the app's config).
    """
    config = app.config
    kafka = Clients.of(config) if kafka is None else kafka
    log = ControlLog(kafka, config.control_topic)
    check_retention(kafka, [REGISTRY_TOPIC, config.control_topic])
    state = log.read()
    if state.app is None or state.generation is None:
        raise ConfigError(
            f"app {config.app_id!r} has never run, so there is nothing to scale. Fix: set "
            f"processors: {processors} in the config and start it."
        )
    if state.scaling is not None:
        scale = state.scaling
        phases = {f"{s}->{t}": h.phase.value for (s, t), h in scale.handoffs.items()}
        raise ConfigError(
            f"a scale to {scale.new_processors} processors (generation {scale.generation}) is "
            f"in progress: {phases}. Fix: wait until it completes (`splitstate status`)."
        )
    growth = state.growth
    if growth is not None:
        raise ConfigError(_changing(kafka, config.control_topic, growth.topic, growth.partitions))
    if processors == state.generation.processors:
        raise ConfigError(f"app {config.app_id!r} already runs {processors} processors")
    entries = TopicRegistry(kafka).read()
    growing = {
        topic: entries[topic]
        for topic in state.app.inputs
        if entries[topic].growth is not None or entries[topic].pending()
    }
    if growing:
        topic, entry = next(iter(growing.items()))
        what, markers = (
            ("shrinking", "drain marker")
            if _direction(entry, entry.partitions) == "shrinking"
            else ("growing", "threshold")
        )
        raise ConfigError(
            f"input topic {topic!r} is {what} to {entry.partitions} partitions (`splitstate "
            f"expand` has not recorded every {markers} yet); a scale now could not plan the "
            "partitions' handoffs. Fix: wait until the expand command finishes (run it again "
            "to resume it if it stopped), then scale."
        )
    counts = {topic: entries[topic].partitions for topic in state.app.inputs}
    for topic, initial in state.app.inputs.items():
        try:
            check_layout(initial, state.app.initial_processors, counts[topic], processors)
        except ValueError as error:
            raise ConfigError(f"cannot scale to {processors}: topic {topic!r}: {error}") from None
    _check_history(
        kafka,
        app,
        entries,
        b=state.app.initial_processors,
        current=state.generation.processors,
        processors=processors,
    )
    generation = state.next_generation
    request = uuid.uuid4().hex
    record = {
        "type": "scale",
        "generation": generation,
        "processors": processors,
        "partitions": counts,
        # the thresholds bound the ancestors each receiver reads (identical for every reader)
        "histories": {
            topic: history_record(entries[topic].history) for topic in sorted(state.app.inputs)
        },
        "request": request,
    }
    log.append(record)
    after, reason = log.outcome(request)
    if after.scale is None or after.scale.request != request:
        if after.growth is not None:
            topic, partitions = after.growth.topic, after.growth.partitions
            raise ConfigError(_changing(kafka, config.control_topic, topic, partitions))
        raise ConfigError(
            f"the scale to {processors} processors was not accepted: {reason or 'unknown'} (the "
            f"control log {config.control_topic!r} changed after it was read: another request "
            "came first). Fix: check `splitstate status`; ask again once that scale finished."
        )
    return after.scale


def abort_scale(app: App, reason: str, kafka: Kafka | None = None) -> Scale:
    """Abandon the scale in progress; ``ConfigError`` naming why when it cannot be.

    ``kafka``: the port to the app's cluster (by default the clients of the app's config).
    """
    config = app.config
    log = ControlLog(Clients.of(config) if kafka is None else kafka, config.control_topic)
    state = log.read()
    scale = state.scaling
    if scale is None:
        raise ConfigError(
            f"app {config.app_id!r} has no scale in progress, so there is nothing to abort "
            "(`splitstate status` shows the processors in force)."
        )
    log.append(abort_record(scale.generation, reason))
    after = log.read().scale
    if after is None or after.generation != scale.generation or after.aborted is None:
        released = sorted(
            f"{h.source}->{h.target}"
            for h in (after or scale).handoffs.values()
            if h.phase.value in ("RELEASED", "COMPLETE")
        )
        raise ConfigError(
            f"the scale to {scale.new_processors} processors (generation {scale.generation}) "
            f"cannot be aborted: handoffs {released} already released their partitions, so "
            "the receivers are responsible for them. Fix: let the scale finish (see why a "
            "processor stopped in `splitstate status`), then scale back."
        )
    return after


def resume_scale(
    app: App, processor: int | None = None, kafka: Kafka | None = None, *, now: float
) -> list[int]:
    """End the stop of the scale's stopped receivers (``processor``: only that one) once each
    can go on; returns those resumed. ``ConfigError`` naming the reason and the fix when
    there is nothing to resume or it is unsafe: a receiver not restarted since it stopped
    (the cause cannot have been fixed, and its sources would release to a receiver that
    stops again, leaving a scale that can neither finish nor be aborted), or one whose
    progress report says it is not catching up for this scale now. ``now``: the time
    (``time.time()``) reports are judged fresh by."""
    config = app.config
    kafka = Clients.of(config) if kafka is None else kafka
    log = ControlLog(kafka, config.control_topic)
    state = log.read()
    scale = state.scaling
    if scale is None:
        raise ConfigError(
            f"app {config.app_id!r} has no scale in progress, so there is nothing to resume."
        )
    stopped = {j: stop for j, stop in scale.stopped.items() if processor is None or j == processor}
    if not stopped:
        which = "no receiver" if processor is None else f"processor {processor}"
        raise ConfigError(
            f"{which} of the scale to {scale.new_processors} processors (generation "
            f"{scale.generation}) is stopped; nothing to resume (`splitstate status`)."
        )
    reports = read_reports(kafka, config.progress_topic)
    for j, stop in sorted(stopped.items()):
        _check_resumable(
            j, stop, scale, newest=state.instances.get(j), report=reports.get(j), now=now
        )
    request = uuid.uuid4().hex
    log.append(
        *(
            resumed_record(scale.generation, j, stop, request=request)
            for j, stop in sorted(stopped.items())
        )
    )
    after = log.read().scaling
    left = sorted(set(stopped) & set(after.stopped if after is not None else {}))
    if left:
        raise ConfigError(
            f"processors {left} are still stopped: the control log changed after it was read "
            "(see `splitstate status`). Fix: check status, then resume again."
        )
    return sorted(stopped)


def _check_resumable(
    processor: int,
    stop: Stop,
    scale: Scale,
    *,
    newest: str | None,
    report: ProcessorReport | None,
    now: float,
) -> None:
    """Raise ``ConfigError`` when resuming ``processor``'s ``stop`` is unsafe."""
    where = f"processor {processor} stopped {stop.where} ({stop.reason})"
    if stop.instance is not None and newest == stop.instance:
        raise ConfigError(
            f"{where} and has not been restarted since, so the cause cannot be fixed yet; "
            "resuming now would let its sources release to a receiver that stops again. Fix: "
            f"fix the cause, restart processor {processor}, check in `splitstate status` that "
            "it catches up, then resume."
        )
    if report is None or now - report.updated > _REPORT_FRESH_SECONDS:
        return  # no word of it: the restart is the evidence there is
    if report.stopped or report.catch_up_generation != scale.generation:
        raise ConfigError(
            f"{where}; it was restarted, but its last progress report says it is not catching "
            f"up for generation {scale.generation} now. Fix: look at its log, restart it, and "
            "resume once `splitstate status` shows it catching up."
        )


def _changing(kafka: Kafka, control_topic: str, topic: str, partitions: int) -> str:
    """Why a scale is refused while `splitstate expand` holds the control log."""
    try:
        entry = TopicRegistry(kafka).read().get(topic)
    except SplitstateError:  # (only the wording depends on it)
        entry = None
    what = "growing" if entry is None else _direction(entry, partitions)
    return (
        f"`splitstate expand` is {what} input topic {topic!r} to {partitions} partitions (its "
        f"change in control log {control_topic!r} has not finished); a scale now could not "
        "plan the partitions' handoffs. Fix: wait until the expand command finishes (run "
        f"it again with --topic {topic} --partitions {partitions} to resume it if it stopped), "
        "then scale."
    )


def _direction(entry: TopicEntry, partitions: int) -> str:
    """``"shrinking"`` or ``"growing"``: ``entry``'s topic going to ``partitions``, from the
    count before the change in progress (if recorded), else from its count now."""
    counts = entry.history.counts
    recorded = entry.growth is not None and counts[-1] == partitions and len(counts) > 1
    before = counts[-2] if recorded else counts[-1]
    return "shrinking" if partitions < before else "growing"


def _check_history(
    kafka: Kafka,
    app: App,
    entries: RegistryEntries | Mapping[str, TopicEntry],
    *,
    b: int,
    current: int,
    processors: int,
) -> None:
    """Refuse a scale whose receivers would rebuild keys from history retention deleted.

    Replaying (and a Spark build from Kafka) reads every S2 partition from offset 0 (an
    ancestor up to its threshold: one with threshold 0, empty at the growth, is not read);
    with records gone a receiver could only stop, and once another receiver's handoff
    released its partitions the scale could neither finish nor be aborted. An archive
    serves instead. With ``bootstrap: snapshot`` receivers start from their sources'
    snapshots, taken after the scale began: they need only what came after those.
    """
    config = app.config
    if config.bootstrap == "snapshot":
        return
    if config.bootstrap == "spark" and config.spark.archive is not None:
        return
    inputs = [entries[t.topic].history for t in config.inputs]
    plan = plan_scale(b, inputs, current, processors)
    needed = {
        (r.topic, r.partition)
        for receiver in plan.receivers.values()
        for r in receiver.s2
        if r.end_offset != 0
    }
    lost = {
        position: offsets.start
        for position, offsets in watermarks(kafka, needed).items()
        if offsets.start > 0
    }
    if lost:
        where = ", ".join(f"{t}[{p}] starts at {o}" for (t, p), o in sorted(lost.items()))
        raise ConfigError(
            f"cannot scale to {processors}: the processors that gain keys rebuild them from "
            f"the input's whole history, but retention deleted its first records ({where}). "
            "Fix: set bootstrap: spark with spark.archive (a Parquet archive of the inputs), "
            "or keep the inputs' whole history (retention.ms=-1)."
        )
