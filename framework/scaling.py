"""Asking for a new processor count: the ``scale`` record that starts a generation."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient

from framework.app import App
from framework.config import ConfigError
from framework.controllog import ControlLog
from framework.registry import TopicRegistry
from rebalance import check_layout
from rebalance.control import ControlState, Scale, abort_record, history_record

__all__ = ["abort_scale", "read_control", "request_scale"]


def read_control(app: App) -> ControlState:
    """The app's control state, read from its control log."""
    config = app.config
    client = config.kafka.client_settings()
    return ControlLog(client, AdminClient(client), config.control_topic).read()


def request_scale(app: App, processors: int) -> Scale:
    """Start a scale to ``processors``; ``ConfigError`` naming the reason when it cannot be."""
    config = app.config
    client = config.kafka.client_settings()
    admin = AdminClient(client)
    log = ControlLog(client, admin, config.control_topic)
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
    if processors == state.generation.processors:
        raise ConfigError(f"app {config.app_id!r} already runs {processors} processors")
    entries = TopicRegistry(client, admin).read()
    growing = {
        topic: entries[topic]
        for topic in state.app.inputs
        if entries[topic].growth is not None or entries[topic].pending()
    }
    if growing:
        topic, entry = next(iter(growing.items()))
        raise ConfigError(
            f"input topic {topic!r} is growing to {entry.partitions} partitions (`splitstate "
            "expand` has not recorded every threshold yet); a scale now could not plan the new "
            "partitions' handoffs. Fix: wait until the expand command finishes (run it again "
            "to resume it if it stopped), then scale."
        )
    counts = {topic: entries[topic].partitions for topic in state.app.inputs}
    for topic, initial in state.app.inputs.items():
        try:
            check_layout(initial, state.app.initial_processors, counts[topic], processors)
        except ValueError as error:
            raise ConfigError(f"cannot scale to {processors}: topic {topic!r}: {error}") from None
    generation = state.next_generation
    record = {
        "type": "scale",
        "generation": generation,
        "processors": processors,
        "partitions": counts,
        # the thresholds bound the ancestors each receiver reads (identical for every reader)
        "histories": {
            topic: history_record(entries[topic].history) for topic in sorted(state.app.inputs)
        },
    }
    log.append(record)
    after = log.read()
    if after.scale is None or after.scale.generation != generation:
        reason = after.ignored[-1] if after.ignored else "unknown"
        raise ConfigError(f"the scale was not accepted: {reason}")
    return after.scale


def abort_scale(app: App, reason: str) -> Scale:
    """Abandon the scale in progress; ``ConfigError`` naming why when it cannot be."""
    config = app.config
    client = config.kafka.client_settings()
    log = ControlLog(client, AdminClient(client), config.control_topic)
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
