"""The growth fence, checked on every consumed record: a keyed record must sit on the partition
its ``splitstate.count`` header (the count its producer placed it with) gives its key.

``SplitstateProducer`` and the runtime's outputs set the header. A record whose header places
it elsewhere is dead-lettered (stage ``placement``, reason ``misplaced ...``) and changes no
state: processing it would split its key's state across processors. So is a record that its
header does place there but that landed after the growth fence (``late_record``, reason
``late ...``): a key a growth split off to a child partition has no record in the parent after
the child's marker. Records without the header
come from producers that bypass the fence; they are processed, and counted per input partition
in the processor's state (``UNFENCED_SCOPE``) for ``splitstate status``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import mmh3

from framework.coordination.registry import TopicEntry
from framework.errors import SplitstateError
from framework.kafka import DeliveryCallback, Header, KafkaProducer
from rebalance import TopicHistory, bucket, key_hash, level, parent

__all__ = [
    "COUNT_HEADER",
    "NO_COUNT_HEADER",
    "UNFENCED_SCOPE",
    "Fence",
    "LinearHashPartitioner",
    "NoCountHeader",
    "count_header",
    "fences_of",
    "late_record",
    "misplacement",
    "produce_placed",
]

#: Header carrying the partition count a record was placed with.
COUNT_HEADER = "splitstate.count"

#: Where a processor's state counts, per input partition, the records it processed without a
#: ``splitstate.count`` header (``StateBatch.set_progress`` / ``ProcessorDatabase.progress``).
UNFENCED_SCOPE = "unfenced"


class NoCountHeader:
    """The record has no ``splitstate.count`` header."""


NO_COUNT_HEADER = NoCountHeader()


def count_header(headers: Iterable[tuple[str, Any]] | None) -> str | bytes | NoCountHeader | None:
    """The last ``splitstate.count`` header's value (the last is the producer's own)."""
    found: str | bytes | NoCountHeader | None = NO_COUNT_HEADER
    for name, value in headers or ():
        if name == COUNT_HEADER:
            found = value
    return found


def misplacement(
    key: bytes, topic: str, partition: int, initial: int, placed: str | bytes | None
) -> str | None:
    """Why a keyed record whose ``splitstate.count`` header is ``placed`` may not be processed
    on ``partition`` of ``topic`` (``initial`` partitions at first); ``None`` if it sits where
    that count places its key: ``bucket(key_hash(key), initial, count)``."""
    layout = _layout(initial, placed)
    if layout is None:
        return (
            f"misplaced: its {COUNT_HEADER} header {placed!r} is not a partition count of "
            f"{topic!r} (at least its initial {initial}), so where its key belongs is unknown; "
            "the record was not processed. Fix: produce with SplitstateProducer, which sets it."
        )
    low, split, count = layout
    h = mmh3.hash(key, 0, False)  # bucket(key_hash(key), initial, count), inlined
    expected = h % low
    if expected < split:
        expected = h % (low << 1)
    if expected == partition:
        return None
    return (
        f"misplaced: placed with {count} partitions ({COUNT_HEADER} header), key {key!r} "
        f"belongs in {topic}[{expected}] (bucket(key_hash(key), {initial}, {count})), but the "
        f"record is in {topic}[{partition}]; processing it there would split the key's state "
        "across processors, so it was not processed. Fix: produce with SplitstateProducer "
        "(or place keys with bucket(key_hash(key), N, M) from the topic registry), then send "
        "the record again."
    )


#: a growth fence in a parent partition: the child split off, the partition count that created
#: it, and the offset of its marker in the parent (the child's threshold)
Fence = tuple[int, int, int]


def fences_of(history: TopicHistory) -> dict[int, list[Fence]]:
    """Each parent partition's recorded growth fences, from the topic's history."""
    found: dict[int, list[Fence]] = {}
    for child, threshold in sorted(history.thresholds.items()):
        up = parent(child, history.initial_partitions)
        assert up is not None  # thresholds are recorded for partitions a growth created
        count = history.counts[history.created_at(child)]
        found.setdefault(up, []).append((child, count, threshold))
    return found


def late_record(
    key: bytes, where: tuple[str, int, int], initial: int, fences: Iterable[Fence]
) -> str | None:
    """Why a keyed record at ``where`` (topic, partition, offset) of a topic of ``initial``
    partitions at first may not be processed although its
    ``splitstate.count`` header places it there; ``None`` if it may.

    A growth split the record's key off to a child of ``partition`` (``fences``: the
    partition's fences), and the record sits after that child's marker, where the fence
    promises no record of the child's keys: its producer placed it with the count before the
    growth, then paused (a suspended machine, a long GC pause) for longer than its lease
    before sending it. Processed here it would come after the key's newer records in the
    child."""
    topic, partition, offset = where
    h = key_hash(key)
    for child, count, threshold in fences:
        if offset > threshold and _descends(bucket(h, initial, count), child, initial):
            return (
                f"late: key {key!r} moved to {topic}[{child}] when the topic grew to {count} "
                f"partitions, and this record landed in {topic}[{partition}] after that "
                f"partition's marker (offset {threshold}): its producer placed it with the count "
                "before the growth and paused (a suspended machine, a long GC pause) for longer "
                "than its lease before sending it. Processing it here would apply it after the "
                "key's newer records, so it was not processed. Fix: send the record again "
                "(SplitstateProducer places it with the current count)."
            )
    return None


def _descends(partition: int, ancestor: int, initial: int) -> bool:
    """Whether ``partition`` is ``ancestor`` or was split from it (by one or more growths)."""
    current: int | None = partition
    while current is not None and current > ancestor:
        current = parent(current, initial)
    return current == ancestor


@functools.lru_cache(maxsize=1024)
def _layout(initial: int, placed: str | bytes | None) -> tuple[int, int, int] | None:
    """``(low, split, count)`` of ``placed`` partitions grown from ``initial`` (as ``bucket``
    computes them); ``None`` when ``placed`` is not such a count."""
    try:
        count = int(placed) if placed is not None else -1
    except ValueError:
        return None
    if count < initial:
        return None
    low = initial << level(initial, count)
    return low, count - low, count


class LinearHashPartitioner:
    """Partition of a key in a registered topic: ``bucket(key_hash(key), N, M)``."""

    def __init__(self, entries: Mapping[str, TopicEntry]) -> None:
        self._layout: dict[str, tuple[int, int, int]] = {}
        self._headers: dict[str, tuple[str, str]] = {}
        for name, entry in entries.items():
            bucket(0, entry.initial_partitions, entry.partitions)  # validates the layout
            low = entry.initial_partitions << level(entry.initial_partitions, entry.partitions)
            self._layout[name] = (low, entry.partitions - low, entry.partitions)
            self._headers[name] = (COUNT_HEADER, str(entry.partitions))

    def partition(self, topic: str, key: bytes) -> int:
        """The partition ``key`` belongs in: ``bucket(key_hash(key), N, M)``, inlined."""
        try:
            low, split, _count = self._layout[topic]
        except KeyError:
            raise SplitstateError(
                f"topic {topic!r} is not in the splitstate topic registry, so its initial "
                "partition count is unknown. Fix: create it with `splitstate topics create`, "
                "or start the app once, before producing to it."
            ) from None
        h = mmh3.hash(key, 0, False)
        b = h % low
        return h % (low << 1) if b < split else b

    def partitions(self, topic: str) -> int:
        """The partition count keys are placed with."""
        return self._layout[topic][2]

    def count_header(self, topic: str) -> tuple[str, str]:
        """The ``splitstate.count`` header of a record placed by this partitioner."""
        return self._headers[topic]

    @property
    def topics(self) -> list[str]:
        """The topics it places keys for."""
        return list(self._layout)


def produce_placed(
    producer: KafkaProducer,
    partitioner: Callable[[], LinearHashPartitioner],
    topic: str,
    key: bytes,
    value: bytes | None,
    *,
    headers: Sequence[Header] | None = None,
    on_delivery: DeliveryCallback | None = None,
) -> int:
    """Queue one keyed record on the partition its key belongs in, with the count it was
    placed with in the ``splitstate.count`` header (last, after ``headers``); returns the
    partition. The only way splitstate places keys: ``SplitstateProducer`` and the
    runtime's outputs both produce through it.

    ``partitioner()`` gives the counts to place with now (it checks, or waits for, the
    registry lease). While the local queue is full it serves deliveries and places the key
    again with the counts held then: they may have changed while it waited.
    """
    while True:
        counts = partitioner()
        partition = counts.partition(topic, key)
        placed = [*(headers or ()), counts.count_header(topic)]
        try:
            producer.produce(topic, value, key, partition, headers=placed, on_delivery=on_delivery)
            return partition
        except BufferError:
            producer.poll(0.1)  # the local queue is full: let deliveries drain
