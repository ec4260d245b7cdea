"""Late records through a shrink (issue 34): a keyed record is late where its key does not
live at its offset (``TopicHistory.home_at``), and a processor whose view of the registry may
be older than a record reads the registry again before judging it -- but not for a record it
judged by a view read after it, nor for a compaction tombstone, which sits in a key's earlier
partition by design.

The input went 4 -> 8 -> 5: partitions 5, 6 and 7 are deleted, their keys back in 1, 2, 3.
"""

from __future__ import annotations

from collections.abc import Callable

from framework.coordination.registry import Growth, TopicEntry
from framework.growth.compaction import compaction_header
from framework.growth.markers import MARKER_HEADER
from framework.growth.placement import COUNT_HEADER
from framework.growth.placement_check import RegistryView
from framework.processing import RecordProcessor, StoredMessage
from rebalance import Grow, Shrink, TopicHistory, bucket, key_hash
from tests.framework.test_forged_markers import Registry
from tests.framework.test_record_headers import TOPIC, counting_app, database

N = 4
GROWN = Grow(8, dict.fromkeys(range(4, 8), 0), {4: 3, 5: 3, 6: 3, 7: 3})
SHRINKING = TopicHistory(TOPIC, (N, 8, 5), (GROWN, Shrink(5, {1: 20, 2: 20, 3: 20})))
SHRUNK = SHRINKING.with_drains({5: 10, 6: 10, 7: 10})
#: the change in progress once `expand` fenced the shrink (before it writes drain markers)
FENCED = Growth(5, 0, fence_ends={5: 8, 6: 8, 7: 8}, kind="shrink")
Headers = list[tuple[str, bytes | None]]
PLACED_8: Headers = [(COUNT_HEADER, b"8")]
KEY = next(k for k in (f"key-{i}".encode() for i in range(500)) if bucket(key_hash(k), N, 8) == 5)


def processor(
    history: TopicHistory,
    *,
    growths: dict[str, Growth] | None = None,
    registry: Callable[[], RegistryView] | None = None,
) -> RecordProcessor:
    """A processor of an input of ``N`` partitions at first, with ``history``."""
    return RecordProcessor(
        counting_app(), {TOPIC: N}, histories={TOPIC: history}, growths=growths, registry=registry
    )


def judged(processor: RecordProcessor, *messages: StoredMessage) -> list[str | None]:
    """Each message's dead letter reason (``None``: processed)."""
    batch = database(counting_app()).begin()
    found = []
    for message in messages:
        dead = processor.process(batch, message)[1]
        found.append(None if dead is None else dead.reason)
    batch.abort()
    return found


def test_a_record_in_a_deleted_partition_after_its_drain_marker_is_late() -> None:
    before = StoredMessage(TOPIC, 5, 9, KEY, b"", None, PLACED_8)
    after = StoredMessage(TOPIC, 5, 11, KEY, b"", None, PLACED_8)
    processed, late = judged(processor(SHRUNK), before, after)
    assert processed is None
    assert late is not None and late.startswith("late: ")
    assert f"moved to {TOPIC}[1] when the topic shrank to 5 partitions" in late
    assert "after its drain marker (offset 10)" in late


def test_a_drain_marker_met_before_the_registry_records_it_bounds_its_partition() -> None:
    drain: Headers = [(MARKER_HEADER, f"{TOPIC}/2/5/5/drain".encode())]
    marker = StoredMessage(TOPIC, 5, 8, None, b"{}", None, drain)
    before = StoredMessage(TOPIC, 5, 7, KEY, b"", None, PLACED_8)
    after = StoredMessage(TOPIC, 5, 9, KEY, b"", None, PLACED_8)
    found = judged(processor(SHRINKING, growths={TOPIC: FENCED}), before, marker, after)
    assert found[:2] == [None, None]  # a marker of the shrink: no dead letter
    assert found[2] is not None and "after its drain marker (offset 8)" in found[2]


def test_a_late_record_reads_the_registry_once_and_a_tombstone_never() -> None:
    registry = Registry({TOPIC: TopicEntry(SHRUNK)})
    judge = processor(SHRUNK, registry=registry.read)
    late = StoredMessage(TOPIC, 5, 11, KEY, b"", None, PLACED_8)
    skipped: Headers = [compaction_header(TOPIC, 1)]
    tombstone = StoredMessage(TOPIC, 5, 12, KEY, None, None, skipped)
    assert judge.confirm_markers([tombstone]) is None  # in an earlier home by design
    assert registry.reads == 0
    assert judge.confirm_markers([late]) == {TOPIC: TopicEntry(SHRUNK)}
    assert registry.reads == 1
    assert judge.confirm_markers([late]) is None  # judged by a view read after it
    assert registry.reads == 1
    assert judged(judge, late, tombstone) == [judged(processor(SHRUNK), late)[0], None]


def test_a_view_without_the_shrink_reads_the_registry_before_a_merged_key_in_its_survivor() -> None:
    # the processor read the registry at 8 partitions; the shrink changed nothing Kafka
    # describes. KEY's record in 1, placed with 5 partitions, is late by that view (KEY lived
    # in 5): judged by it, it would be lost
    registry = Registry({TOPIC: TopicEntry(SHRUNK)})
    grown = TopicHistory(TOPIC, (N, 8), (GROWN,))
    judge = processor(grown, registry=registry.read)
    placed_5: Headers = [(COUNT_HEADER, b"5")]
    merged = StoredMessage(TOPIC, 1, 25, KEY, b"", None, placed_5)
    assert judged(processor(grown), merged)[0] is not None  # the old view: late
    assert judge.confirm_markers([merged]) == {TOPIC: TopicEntry(SHRUNK)}
    assert judged(judge, merged) == [None]
