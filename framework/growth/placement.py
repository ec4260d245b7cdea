"""The growth fence, checked on every consumed record: a keyed record must sit on a partition
where linear hashing places its key.

With the ``splitstate.count`` header (the count its producer placed it with: what
``SplitstateProducer`` and the runtime's outputs set), the record must sit where that count
places its key: ``bucket(key_hash(key), N, count)``. Without the header, where any partition
count in the topic's history (``TopicHistory.counts``: ``N`` and the count after each growth)
places it. Either way it must also sit where its key lives at that offset (not ``late``, see
``framework.growth.late``). A record that fails is dead-lettered (stage ``placement``, reason
``misplaced ...`` or ``late ...``) and changes no state: processing it would split its key's
state across processors. Records without the header come from producers that bypass the
fence; the processor counts per input partition, in its state, those it processed
(``UNFENCED_SCOPE``) and those it dead-lettered (``UNPLACED_SCOPE``: written by a producer
that does not place keys by linear hashing, e.g. Kafka's default partitioner), for
``splitstate status`` and its log.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import mmh3

from framework.coordination.registry import TopicEntry
from framework.errors import SplitstateError
from framework.growth.compaction_writes import CompactionTombstones
from framework.kafka import DeliveryCallback, Header, KafkaProducer
from rebalance import bucket, level

__all__ = [
    "COUNT_HEADER",
    "NO_COUNT_HEADER",
    "UNFENCED_SCOPE",
    "UNPLACED_CAUSE",
    "UNPLACED_FIX",
    "UNPLACED_SCOPE",
    "Layouts",
    "LinearHashPartitioner",
    "NoCountHeader",
    "count_header",
    "history_layouts",
    "misplaced_reason",
    "misplacement",
    "placed_by",
    "produce_placed",
    "unplaced_reason",
]

#: Header carrying the partition count a record was placed with.
COUNT_HEADER = "splitstate.count"

#: Where a processor's state counts, per input partition, the records it processed without a
#: ``splitstate.count`` header (``StateBatch.set_progress`` / ``ProcessorDatabase.progress``).
UNFENCED_SCOPE = "unfenced"

#: Where a processor's state counts, per input partition, the records without a
#: ``splitstate.count`` header it dead-lettered (stage ``placement``): no count in the topic's
#: history places their key there (or they landed past their key's growth fence).
UNPLACED_SCOPE = "unplaced"

#: What writes records without the ``splitstate.count`` header that no count places where they
#: are (``UNPLACED_SCOPE``), for dead letters, the log and ``splitstate status``
UNPLACED_CAUSE = (
    "written by a producer that does not place keys by linear hashing, e.g. Kafka's default "
    "partitioner"
)
#: the fix for them
UNPLACED_FIX = (
    "write with framework.SplitstateProducer, or a partitioner using the same hash "
    "(bucket(key_hash(key), N, M) over the topic registry's counts; "
    "docs/concepts/linear-hashing.md, 'Writing input')"
)

#: ``(low, split)`` of each partition count in a topic's history, as ``bucket`` computes them
Layouts = tuple[tuple[int, int], ...]


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
    h = mmh3.hash(key, 0, False)
    return misplaced_reason(h, key, (topic, partition), initial, placed)


def misplaced_reason(
    h: int, key: bytes, position: tuple[str, int], initial: int, placed: str | bytes | None
) -> str | None:
    """``misplacement`` of ``key``, whose ``key_hash`` is ``h``, at ``position`` (topic,
    partition)."""
    layout = _layout(initial, placed)
    if layout is None:
        return (
            f"misplaced: its {COUNT_HEADER} header {placed!r} is not a partition count of "
            f"{position[0]!r} (at least its initial {initial}), so where its key belongs is "
            "unknown; the record was not processed. Fix: produce with SplitstateProducer, which "
            "sets it."
        )
    low, split, count = layout
    expected = h % low  # bucket(h, initial, count), inlined
    if expected < split:
        expected = h % (low << 1)
    if expected == position[1]:
        return None
    topic, partition = position
    return (
        f"misplaced: placed with {count} partitions ({COUNT_HEADER} header), key {key!r} "
        f"belongs in {topic}[{expected}] (bucket(key_hash(key), {initial}, {count})), but the "
        f"record is in {topic}[{partition}]; processing it there would split the key's state "
        "across processors, so it was not processed. Fix: produce with SplitstateProducer "
        "(or place keys with bucket(key_hash(key), N, M) from the topic registry), then send "
        "the record again."
    )


def history_layouts(counts: Sequence[int]) -> Layouts:
    """``(low, split)`` of each partition count of a topic's history (``counts``, from ``N``
    up), for ``placed_by``."""
    layouts = []
    for count in counts:
        low = counts[0] << level(counts[0], count)
        layouts.append((low, count - low))
    return tuple(layouts)


def placed_by(h: int, partition: int, layouts: Layouts) -> bool:
    """Whether some count of ``layouts`` (``history_layouts``) places a key whose ``key_hash``
    is ``h`` on ``partition``: ``bucket(h, N, count) == partition``, inlined."""
    for low, split in layouts:
        b = h % low
        if b < split:
            b = h % (low << 1)
        if b == partition:
            return True
    return False


def unplaced_reason(h: int, key: bytes, topic: str, partition: int, counts: Sequence[int]) -> str:
    """Why a keyed record without the ``splitstate.count`` header, whose key (``key_hash``
    ``h``) no count of the topic's history ``counts`` places on ``partition``, is not
    processed."""
    initial, now = counts[0], counts[-1]
    return (
        f"misplaced: no {COUNT_HEADER} header, and no partition count of {topic!r} "
        f"({_listed(counts)}) places key {key!r} in {topic}[{partition}]; linear hashing puts "
        f"it in {topic}[{bucket(h, initial, now)}] (bucket(key_hash(key), {initial}, {now})). "
        f"It was {UNPLACED_CAUSE}. Processing it here would split the key's state across "
        f"processors, so it was not processed. Fix: {UNPLACED_FIX}, then send the record again."
    )


def _listed(counts: Sequence[int]) -> str:
    return ", ".join(str(c) for c in counts) if len(counts) > 1 else f"{counts[0]} partitions"


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
    """Partition of a key in a registered topic: ``bucket(key_hash(key), N, M)``; for a
    compacted topic also the partitions earlier counts placed it on (``earlier_homes``)."""

    def __init__(self, entries: Mapping[str, TopicEntry]) -> None:
        self._layout: dict[str, tuple[int, int, int]] = {}
        self._headers: dict[str, tuple[str, str]] = {}
        #: each compacted topic with an earlier count: its step index, the earlier layouts
        self._earlier: dict[str, tuple[int, Layouts]] = {}
        for name, entry in entries.items():
            bucket(0, entry.initial_partitions, entry.partitions)  # validates the layout
            low = entry.initial_partitions << level(entry.initial_partitions, entry.partitions)
            self._layout[name] = (low, entry.partitions - low, entry.partitions)
            self._headers[name] = (COUNT_HEADER, str(entry.partitions))
            counts = entry.history.counts
            # none while a change is in progress (``compaction_writes`` says why)
            if entry.compacted and len(counts) > 1 and not entry.changing:
                self._earlier[name] = (len(counts) - 1, history_layouts(counts[:-1]))

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

    def earlier_homes(self, topic: str, key: bytes) -> tuple[int, list[int]] | None:
        """For a compacted ``topic`` whose count changed: the step index of the count keys
        are placed with, and every partition an earlier count placed ``key`` on other than
        the one it is placed on now (each once), which may hold the key's older values;
        ``None`` for any other topic, and while a change of its count is in progress
        (announced or recorded: ``TopicEntry.changing``)."""
        earlier = self._earlier.get(topic)
        if earlier is None:
            return None
        step, layouts = earlier
        home = self.partition(topic, key)
        h = mmh3.hash(key, 0, False)
        found: list[int] = []
        for low, split in layouts:
            b = h % low  # bucket(h, N, count), inlined
            if b < split:
                b = h % (low << 1)
            if b != home and b not in found:
                found.append(b)
        return step, found

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
    tombstones: CompactionTombstones | None = None,
) -> int:
    """Queue one keyed record on the partition its key belongs in, with the count it was
    placed with in the ``splitstate.count`` header (last, after ``headers``); returns the
    partition. The only way splitstate places keys: ``SplitstateProducer`` and the
    runtime's outputs both produce through it.

    For a compacted topic whose count changed, the key's compaction tombstones follow it
    (``framework.growth.compaction_writes``; ``tombstones`` remembers which were written,
    ``None``: none are). ``partitioner()`` gives the counts to place with now (it checks, or
    waits for, the registry lease). While the local queue is full it serves deliveries and
    places the key again with the counts held then: they may have changed while it waited.
    """
    while True:
        counts = partitioner()
        partition = counts.partition(topic, key)
        placed = [*(headers or ()), counts.count_header(topic)]
        try:
            producer.produce(topic, value, key, partition, headers=placed, on_delivery=on_delivery)
            break
        except BufferError:
            producer.poll(0.1)  # the local queue is full: let deliveries drain
    if tombstones is not None:
        tombstones.write(producer, counts, topic, key, on_delivery=on_delivery)
    return partition
