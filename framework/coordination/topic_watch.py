"""Noticing that input topics changed shape, through their KIP-1101 metadata hash.

``TopicWatcher.poll`` describes the app's input topics every few seconds and combines their
topic hashes (topic id, name, partitions and replica racks) into the group hash Kafka's own
coordinator computes. When it changes, the registry is read again: a growth recorded by
``splitstate expand`` gives the new partitions (and, later, their thresholds); partitions
that exist in Kafka but not in the registry were added by hand and are reported, not read.

``TopicWatcher.record_hash`` keeps the last hash in the app's control log (a ``metadata_hash``
record, written when the log's differs), so a processor that starts notices that the inputs
changed while the app was down.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from framework.coordination.control_log import ControlLog
from framework.coordination.registry import TopicEntry, TopicRegistry
from framework.errors import SplitstateError
from framework.kafka import Kafka
from rebalance import group_hash, topic_hash

__all__ = ["TopicWatcher", "input_group_hash"]

log = logging.getLogger(__name__)
_EVERY_SECONDS = 2.0
_UNREGISTERED_SECONDS = 60.0


def input_group_hash(kafka: Kafka, topics: Sequence[str]) -> tuple[int, dict[str, int]]:
    """The KIP-1101 group hash of ``topics`` and each topic's partition count in Kafka."""
    hashes: dict[str, int] = {}
    counts: dict[str, int] = {}
    for name, description in kafka.describe_topics(topics).items():
        hashes[name] = topic_hash(description.topic_id, name, description.racks)
        counts[name] = description.partitions
    return group_hash(hashes), counts


class TopicWatcher:
    """Re-reads the registry's entries of ``topics`` when their metadata hash changes."""

    def __init__(
        self,
        kafka: Kafka,
        topics: Sequence[str],
        entries: Mapping[str, TopicEntry],
    ) -> None:
        self._kafka = kafka
        self._topics = list(topics)
        self.entries = dict(entries)
        self.hash: int | None = None
        self._checked = 0.0
        self._reported: set[tuple[str, int]] = set()
        self._ahead_since: dict[str, float] = {}
        self._pending = any(entry.pending() for entry in self.entries.values())
        self._recorded: int | None = None  # the hash this watcher last wrote to the control log
        self._record_after = 0.0

    def poll(self, force: bool = False) -> bool:
        """Every few seconds: whether the registry entries changed (then ``entries`` has them).

        While a growth waits for its thresholds, the registry is read on every check even if
        the metadata hash did not change (thresholds are recorded after the partitions).
        """
        now = self._kafka.clock.monotonic()
        if not force and now - self._checked < _EVERY_SECONDS:
            return False
        self._checked = now
        try:
            current, counts = input_group_hash(self._kafka, self._topics)
        except Exception as error:  # metadata is retried on the next check
            log.warning("could not describe the input topics: %s", error)
            return False
        if current == self.hash and not self._pending:
            return False
        self.hash = current
        known = TopicRegistry(self._kafka).read()
        fresh = {name: known[name] for name in self._topics if name in known}
        changed = fresh != self.entries
        self.entries = fresh
        ahead = {  # partitions Kafka has that the registry does not (yet) record
            name: count
            for name, count in counts.items()
            if name in fresh and count > fresh[name].history.created
        }
        # keep reading the registry while a growth is under way: `expand` creates the
        # partitions first, then records the count, then the thresholds
        self._pending = bool(ahead) or any(entry.pending() for entry in fresh.values())
        self._report_unregistered(ahead, now)
        return changed

    def learn(self, entries: Mapping[str, TopicEntry]) -> None:
        """Take ``entries`` read from the registry elsewhere (a processor that met a record
        its view was older than: a shrink or a re-growth changes nothing Kafka describes), so
        that a step they show in progress is followed here too (``poll`` reads the registry
        while one is)."""
        learned = {name: entry for name, entry in entries.items() if name in self._topics}
        self.entries.update(learned)
        self._pending = self._pending or any(entry.pending() for entry in learned.values())

    def record_hash(
        self, control: ControlLog, logged: int | None, *, starting: bool = False
    ) -> None:
        """Write the current hash to ``control`` when it differs from ``logged`` (the log's).

        Any processor may write it; a duplicate is harmless (the last record wins). A watcher
        does not write the same hash twice while its own record travels back through the log.
        ``starting``: also log that the inputs changed while the app was down.
        """
        current = self.hash
        if current is None or current in (logged, self._recorded):
            return
        if starting and logged is not None:
            log.info(
                "metadata of the input topics changed while the app was down (hash %d in the "
                "control log, %d now): assignment and ordering gates are evaluated again",
                logged,
                current,
            )
        now = self._kafka.clock.monotonic()
        if now < self._record_after:
            return
        try:
            control.append({"type": "metadata_hash", "hash": current})
        except SplitstateError as error:  # written on a later check
            self._record_after = now + _EVERY_SECONDS
            log.warning("could not record the input topics' metadata hash: %s", error)
            return
        self._recorded = current

    def _report_unregistered(self, ahead: Mapping[str, int], now: float) -> None:
        """Partitions still unregistered a minute after they appeared were added by hand."""
        for name in list(self._ahead_since):
            if name not in ahead:
                del self._ahead_since[name]
        for name, count in ahead.items():
            since = self._ahead_since.setdefault(name, now)
            entry = self.entries[name]
            if now - since < _UNREGISTERED_SECONDS or (name, count) in self._reported:
                continue
            self._reported.add((name, count))
            log.error(
                "input topic %s has %d partitions in Kafka but %d in the splitstate registry: "
                "partitions %d..%d were added outside `splitstate expand` and are not read "
                "(keys are still placed and processed with %d). Fix: run `splitstate expand "
                "MODULE:APP --topic %s --partitions %d`.",
                name,
                count,
                entry.history.created,
                entry.history.created,
                count - 1,
                entry.partitions,
                name,
                count,
            )
