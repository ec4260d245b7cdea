"""The topic registry: facts every producer and app must share about a topic.

One compacted topic per cluster, ``__splitstate_topics``. Each value is JSON: the topic's
initial partition count ``N``, its partition-count history (``counts``, the ``steps``: growths
and shrinks with their boundary offsets, and the ``thresholds`` of its growths for readers that
know only growths), the key hash, the producers' lease and delivery timeout, whether the topic
is compacted (its ``cleanup.policy`` includes ``compact`` when it is first registered:
``register_all``), and a change of its count in progress (``splitstate expand``, the field
``growth``; its ``kind`` is ``grow`` or ``shrink``).

Every record gets its own key, the topic's name then a random id (``TOPIC/ID``), as in the
app's control log: compaction keeps only the last record of a key, so with a key per record it
removes nothing but a record whose key a later tombstone names, and the log reads the same
however much of it was compacted. Each is written again right after it under the topic's name
alone, the key a splitstate before keys per record reads (it keeps the topic's last record):
for ``read`` those copies change nothing (compaction keeps the last copy, which follows its
own record).
``read`` reads it as compacted already (a record followed by another of its key is skipped).
A topic's records are then folded in log order: a record is kept only when it supersedes the
entry kept before it (``framework.coordination.entry_order``: it goes further through the
topic's changes and keeps every fact recorded), so a run of ``expand`` writing from an older
copy changes nothing, and every reader sees the same entry.
The topic is created compacted with ``retention.ms=-1`` and ``retention.bytes=-1``; apps,
``scale`` and ``expand`` refuse to run while its config would delete records
(``framework.kafka.check_retention``).

Producers place keys with the last count and must re-read the registry within ``lease_ms``;
a record placed with an older count is delivered (or failed) within ``delivery_timeout_ms``.
So ``lease_ms + delivery_timeout_ms`` after a new count is recorded, no record placed with the
old count can still land, and the growth's markers can fence the parents.

**Records that cannot be read.** Every app and producer on the cluster reads the whole
registry, so what one bad record does must not depend on whose it is:

- a record whose key cannot name a topic (not UTF-8, or not a Kafka topic name before its
  ``/``) is ignored by every reader: no app or producer reads it as its own;
- a topic whose last record that is not skipped cannot be read (not JSON, not of the schema
  below, or naming another topic than its key) is *registered but unreadable*: it stays in
  what ``read`` returns (so nobody registers it afresh: a new history would send keys to
  other partitions), and only a reader that asks for that topic gets ``RegistryRecordError``
  naming the offset, the key and the fix: a tombstone of its key (then every reader goes on
  from the entry before it), or the entry written again. Every other app and producer goes
  on. The entry before it is not used meanwhile: the record may be a newer splitstate's.
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import orjson

from framework.coordination.entry_order import supersedes
from framework.coordination.topic_entry import (
    DEFAULT_DELIVERY_TIMEOUT_MS,
    DEFAULT_LEASE_MS,
    Announcement,
    Change,
    Growth,
    TopicEntry,
)
from framework.errors import SplitstateError
from framework.kafka import COMPACTED, Kafka, LogRecord, TopicSpec, compacts
from rebalance import TopicHistory
from rebalance.record_checks import (
    MalformedRecordError,
    json_object,
    shown,
)

__all__ = [
    "DEFAULT_DELIVERY_TIMEOUT_MS",
    "DEFAULT_LEASE_MS",
    "REGISTRY_TOPIC",
    "Announcement",
    "Change",
    "Growth",
    "RegistryEntries",
    "RegistryRecordError",
    "TopicEntry",
    "TopicRegistry",
]

REGISTRY_TOPIC = "__splitstate_topics"


#: how many parsed record values ``_entry`` keeps
_PARSED_ENTRIES = 4096
#: what Kafka allows as a topic name
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


class RegistryRecordError(SplitstateError):
    """The registry's last record of a topic cannot be read: its producers and apps stop
    rather than guess the topic's partition history."""

    def __init__(
        self, topic: str, offset: int, key: bytes | None, problem: str, previous: int | None
    ) -> None:
        self.topic, self.offset = topic, offset
        shown_key = key.decode("utf-8", "replace") if key is not None else ""
        fix = (
            f"write a tombstone of its key {shown_key!r}: every reader then goes on from its "
            f"entry before it (the record at offset {previous})"
            if previous is not None
            else f"write its entry again, with a key {topic!r} followed by '/' and any id (the "
            "log holds no readable record of it: its partition counts and thresholds are "
            "those `splitstate status` showed)"
        )
        super().__init__(
            f"the topic registry {REGISTRY_TOPIC!r} holds an entry for topic {topic!r} that "
            f"cannot be read, at offset {offset}: {problem}. Producers and apps of {topic!r} "
            "stop rather than guess its partition history (a wrong one sends keys to other "
            f"partitions). Fix: {fix}. Only if {topic!r} never grew (`splitstate expand`), "
            "tombstones of the keys of all its records instead let the next start register it "
            "again with its partition count."
        )


@dataclass(frozen=True)
class _Unreadable:
    """A topic whose last registry record cannot be read."""

    offset: int
    key: bytes | None
    problem: str
    #: the offset of its entry kept before, if any
    previous: int | None


class RegistryEntries:
    """Every registered topic's entry, as ``TopicRegistry.read`` found it. A topic whose
    last record cannot be read is registered (``in`` is true) but reading its entry raises
    ``RegistryRecordError``. Not a mapping on purpose: nothing copies or walks the whole
    registry, which would meet other apps' unreadable entries; ``readable`` gives the
    entries that can be read."""

    def __init__(
        self, entries: Mapping[str, TopicEntry], unreadable: Mapping[str, _Unreadable]
    ) -> None:
        self._entries = dict(entries)
        self._unreadable = dict(unreadable)

    def __contains__(self, topic: str) -> bool:
        return topic in self._entries or topic in self._unreadable

    def __getitem__(self, topic: str) -> TopicEntry:
        bad = self._unreadable.get(topic)
        if bad is not None:
            raise RegistryRecordError(topic, bad.offset, bad.key, bad.problem, bad.previous)
        return self._entries[topic]

    def get(self, topic: str) -> TopicEntry | None:
        """The entry of ``topic``, ``None`` when it is not registered."""
        if topic not in self:
            return None
        return self[topic]

    def readable(self) -> dict[str, TopicEntry]:
        """The entries that can be read."""
        return dict(self._entries)


class TopicRegistry:
    """Read and write the cluster's topic registry, through ``kafka``."""

    def __init__(self, kafka: Kafka) -> None:
        self._kafka = kafka

    @staticmethod
    def topic_spec() -> TopicSpec:
        """The registry topic: one partition, compacted, never deleting records."""
        return TopicSpec(REGISTRY_TOPIC, 1, config=COMPACTED)

    def ensure_topic(self) -> None:
        """Create the registry topic when missing (compacted, never deleting records)."""
        self._kafka.create_topics([self.topic_spec()])

    def read(self) -> RegistryEntries:
        """Every registered topic's entry, from the log read as compacted and folded (see the
        module docstring, also for records that cannot be read)."""
        records = self._kafka.read_log(REGISTRY_TOPIC)
        last = {record.key: record.offset for record in records}  # what compaction keeps
        kept: dict[str, TopicEntry] = {}  # each topic's last kept readable entry
        unreadable: dict[str, _Unreadable] = {}
        readable_at: dict[str, int] = {}
        for record in records:
            if record.value is None or last[record.key] != record.offset:
                continue  # a tombstone, or a record a later one of its key replaces
            topic = _topic_of(record)
            if topic is None:
                continue  # no app or producer reads it as its own
            try:
                entry = _entry(topic, record.value)
            except MalformedRecordError as problem:
                previous = readable_at.get(topic)
                unreadable[topic] = _Unreadable(record.offset, record.key, str(problem), previous)
                continue
            current = kept.get(topic)
            if current is not None and not supersedes(entry, current):
                continue  # written from an older copy: the first record of a fact wins
            kept[topic] = entry
            unreadable.pop(topic, None)
            readable_at[topic] = record.offset
        entries = {topic: entry for topic, entry in kept.items() if topic not in unreadable}
        return RegistryEntries(entries, unreadable)

    def write(self, entry: TopicEntry) -> None:
        """Record ``entry`` (replacing what was known about its topic)."""
        self.write_all([entry])

    def write_all(self, entries: Sequence[TopicEntry]) -> None:
        """Record ``entries`` in one append, in order (each replacing what was known)."""
        if entries:
            values = [(e.topic, orjson.dumps(e.to_record())) for e in entries]
            # each twice: under its own key, and under the topic's name for readers of a
            # splitstate before keys per record (they keep its last record, as then)
            records = [(key, value) for t, value in values for key in (record_key(t), t.encode())]
            self._kafka.append(REGISTRY_TOPIC, records)

    def register(
        self,
        topic: str,
        partitions: int,
        key_hash: str = "murmur3",
        lease_ms: int = DEFAULT_LEASE_MS,
        delivery_timeout_ms: int = DEFAULT_DELIVERY_TIMEOUT_MS,
    ) -> TopicEntry:
        """The registered entry of ``topic``, registering it with ``partitions`` if new."""
        history = TopicHistory.of(topic, [partitions])
        entry = TopicEntry(history, key_hash, lease_ms, delivery_timeout_ms)
        return self.register_all([entry])[topic]

    def register_all(self, entries: Sequence[TopicEntry]) -> dict[str, TopicEntry]:
        """Each topic's registered entry, registering those of ``entries`` whose topic is
        new: one read of the registry, then one append of the new ones, each ``compacted``
        when its topic's ``cleanup.policy`` includes ``compact`` as Kafka says now. A topic
        whose entry cannot be read is not new: ``RegistryRecordError``."""
        known = self.read()
        new = [e for e in entries if e.topic not in known]
        if new:
            configs = self._kafka.topic_configs([e.topic for e in new])
            new = [
                replace(e, compacted=e.compacted or compacts(configs.get(e.topic, {}))) for e in new
            ]
        if not new:
            return {e.topic: known[e.topic] for e in entries}
        self.write_all(new)
        kept = self.read()  # another registration may have come first: the first is kept
        return {e.topic: kept[e.topic] for e in entries}


def record_key(topic: str) -> bytes:
    """A new key for one record of ``topic``'s entry: its name, then a random id."""
    return f"{topic}/{uuid.uuid4().hex}".encode()


def _topic_of(record: LogRecord) -> str | None:
    """The topic ``record``'s key names (``None``: none, not even another app's): the key
    up to its first ``/`` (all of it in a record of an older splitstate)."""
    try:
        key = record.key.decode() if record.key is not None else ""
    except UnicodeDecodeError:
        return None
    topic = key.split("/", 1)[0]
    return topic if _TOPIC_NAME.fullmatch(topic) else None


@functools.lru_cache(maxsize=_PARSED_ENTRIES)
def _entry(topic: str, value: bytes) -> TopicEntry:
    """The entry of ``topic`` its record ``value`` says (``MalformedRecordError``). Each
    ``read`` parses the whole log again; the entries (immutable, a pure function of the bytes)
    of the last few thousand values are kept, so only new records are parsed again."""
    entry = TopicEntry.from_record(json_object(value))
    if entry.topic != topic:
        raise MalformedRecordError(f"its value is the entry of another topic, {shown(entry.topic)}")
    return entry
