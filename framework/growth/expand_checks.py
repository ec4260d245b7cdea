"""The refusals of `splitstate expand`: a change of a topic's partition count the registry,
the app and Kafka cannot take. Each is raised before anything is written."""

from __future__ import annotations

from framework.coordination.registry import Growth, TopicEntry, TopicRegistry
from framework.errors import SplitstateError
from framework.kafka import Kafka

__all__ = ["ExpandError", "change_noun", "check_request", "registered"]


class ExpandError(SplitstateError):
    """A change of a topic's partition count cannot be made (or resumed) as asked."""


def change_noun(kind: str) -> str:
    """``"growth"`` or ``"shrink"``, for a change of ``kind`` (``Growth.kind``)."""
    return "shrink" if kind == "shrink" else "growth"


def registered(registry: TopicRegistry, topic: str) -> TopicEntry:
    """The registry's entry of ``topic``; ``ExpandError`` when it has none."""
    entry = registry.read().get(topic)
    if entry is None:
        raise ExpandError(
            f"topic {topic!r} is not in the splitstate topic registry. Fix: create it with "
            "`splitstate topics create MODULE:APP` (or start its app once) before changing "
            "its partitions."
        )
    return entry


def check_request(kafka: Kafka, entry: TopicEntry, partitions: int, processors: int | None) -> None:
    """Refuse a change of ``entry``'s topic to ``partitions`` that the registry, the app
    (``processors``: the processor count in force, ``None`` when not known) and Kafka cannot
    take. A change in progress to ``partitions`` is resumed, never refused."""
    topic = entry.topic
    if entry.growth is not None:
        _check_in_progress(topic, entry.growth, partitions)
        return
    if partitions == entry.partitions:
        return  # nothing to change
    initial = entry.initial_partitions
    if partitions < initial:
        raise ExpandError(
            f"{topic!r} has {entry.partitions} partitions and began with {initial}; a shrink "
            f"never goes below the initial count (linear hashing places every key with at "
            f"least {initial}). Fix: ask for {initial} partitions or more."
        )
    if processors is not None and partitions < processors:
        raise ExpandError(
            f"the app runs {processors} processors, more than the {partitions} partitions of "
            f"{topic!r} asked for: a processor owns whole partitions, and a deleted partition's "
            "keys stay on their processor only while no processor is left without one. Fix: "
            f"scale in first (`splitstate scale ... --processors {partitions}` or fewer), then "
            "shrink."
        )
    created = entry.history.created
    actual = kafka.partition_counts([topic]).get(topic, 0)
    if actual > max(created, partitions):
        raise ExpandError(
            f"{topic!r} already has {actual} partitions in Kafka (added outside `splitstate "
            f"expand`; the registry records {created}), more than the {partitions} asked for. "
            f"Fix: expand to at least {actual}."
        )


def _check_in_progress(topic: str, change: Growth, partitions: int) -> None:
    if change.partitions == partitions:
        return
    noun = change_noun(change.kind)
    raise ExpandError(
        f"a {noun} of {topic!r} to {change.partitions} partitions is in progress. Fix: finish "
        f"it first (`splitstate expand ... --topic {topic} --partitions {change.partitions}`), "
        "then change it again."
    )
