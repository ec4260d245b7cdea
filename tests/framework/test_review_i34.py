"""Adversarial review of issue 34 (shrinks, lineage, markers, registry records): each test
pins one defect found in review and fails on the code it was written against.

- a registry record naming a huge partition count is read by building one entry per
  partition, so one bad entry of any topic runs every app and producer of the cluster out of
  memory (``TopicRegistry.read`` parses every topic's record);
- a change in progress (``growth``) that disagrees with the history is read as valid, and
  ``expand`` then crashes resuming it;
- the placement check on every fold path (``RecordProcessor``: live, restore, catch-up,
  Spark) judges late records by growth fences only: after a shrink it dead-letters a merged
  key's new records in its survivor, lets a late record in a deleted partition through, and
  after a partition is grown again forgets the first growth's fence;
- a marker of the step in progress is taken at any offset once the fence is recorded, also
  one written before the fence ends (during the lease wait), whose offset then fences.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import cast

import pytest

from framework.coordination.registry import Growth, TopicEntry
from framework.growth.markers import MARKER_HEADER, unrecorded_marker
from framework.growth.placement_check import PlacementCheck
from rebalance import Grow, TopicHistory, bucket, key_hash
from rebalance.record_checks import MalformedRecordError
from statestore import StateBatch

TOPIC = "in"


def _key(initial: int, count: int, partition: int) -> bytes:
    """A key that ``count`` partitions (grown from ``initial``) place on ``partition``."""
    for i in range(10_000):
        key = f"k{i}".encode()
        if bucket(key_hash(key), initial, count) == partition:
            return key
    raise AssertionError("no key")


# -- registry records ------------------------------------------------------------------------

_READ_HUGE = textwrap.dedent(
    """
    import json, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (1_500_000_000, 1_500_000_000))
    from framework.coordination.topic_entry import TopicEntry
    from rebalance.record_checks import MalformedRecordError
    try:
        TopicEntry.from_record(json.loads(sys.argv[1]))
        print("read")
    except MalformedRecordError:
        print("refused")
    except MemoryError:
        print("MemoryError")
    """
)


@pytest.mark.parametrize(
    "record",
    [
        # written before steps: counts only
        '{"topic": "other", "counts": [1, 2147483647]}',
        # with steps: a growth with no starts
        '{"topic": "other", "counts": [1, 2147483647], '
        '"steps": [{"kind": "grow", "count": 2147483647, "starts": {}}]}',
    ],
    ids=["counts-only", "steps"],
)
def test_a_registry_record_with_a_huge_count_is_refused_not_built_partition_by_partition(
    record: str,
) -> None:
    """Every app and producer on the cluster reads every topic's registry record; one that
    says 2**31 - 1 partitions must be refused (or read cheaply), never allocate per partition.
    Run in a child process under a 1.5 GB address-space limit so the machine stays up."""
    done = subprocess.run(
        [sys.executable, "-c", _READ_HUGE, record],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.stdout.strip() in ("refused", "read"), (done.stdout, done.stderr[-2000:])


_GROWN_STEPS = [{"kind": "grow", "count": 8, "starts": {str(c): 0 for c in range(4, 8)}}]


@pytest.mark.parametrize(
    ("counts", "steps", "growth"),
    [
        # a growth to 8 in progress, but the history never reached 8
        ([4], [], {"kind": "grow", "partitions": 8, "recorded_ms": 0}),
        # a shrink in progress, but the last step is a growth
        ([4, 8], _GROWN_STEPS, {"kind": "shrink", "partitions": 8, "recorded_ms": 0}),
        # fence ends that miss the parents 1..3 of the grown partitions
        ([4, 8], _GROWN_STEPS, {"partitions": 8, "recorded_ms": 0, "fence_ends": {"0": 5}}),
    ],
    ids=["count-not-recorded", "kind-disagrees", "fence-ends-miss-parents"],
)
def test_a_change_in_progress_that_disagrees_with_the_history_is_refused(
    counts: list[int], steps: list[dict[str, object]], growth: dict[str, object]
) -> None:
    """``expand`` writes the change in progress in the same record as its step, so a
    ``growth`` whose count, kind or fenced partitions disagree with the last step was not
    written by it; read as valid, resuming it crashes (``change_markers``: IndexError,
    ``with_drains``: ValueError, ``fence_ends[p]``: KeyError)."""
    record = {"topic": TOPIC, "counts": counts, "steps": steps, "growth": growth}
    with pytest.raises(MalformedRecordError):
        TopicEntry.from_record(record)


# -- the placement check through shrinks -------------------------------------------------------

#: 4 -> 8: markers at 10 in the parents
GROWN = TopicHistory(
    TOPIC, (4, 8), (Grow(8, dict.fromkeys(range(4, 8), 0), dict.fromkeys(range(4, 8), 10)),)
)
#: ... -> 5: holds at 20 in the survivors, drains at 30
SHRUNK = GROWN.shrunk(5, {1: 20, 2: 20, 3: 20}).with_drains({5: 30, 6: 30, 7: 30})
#: ... -> 8 again: 5, 6, 7 start their second life at 31, markers at 40 in 1, 2, 3
REGROWN = SHRUNK.grown(8, {5: 31, 6: 31, 7: 31}).with_markers({5: 40, 6: 40, 7: 40})


def _placement(
    history: TopicHistory, count: int, where: tuple[str, int, int], key: bytes
) -> str | None:
    check = PlacementCheck({TOPIC: 4}, {TOPIC: history}, {}, {})
    headers = [("splitstate.count", str(count).encode())]
    return check.check(cast(StateBatch, None), headers, key, where, restore=True)


def test_a_merged_keys_new_records_in_its_survivor_are_processed_after_a_shrink() -> None:
    """4 -> 8 -> 5: a key of 5 (at 8) lives in 1 again from 1's hold; its records there,
    placed with 5 partitions, are in their home (``home_at``), not late."""
    key = _key(4, 8, 5)
    assert SHRUNK.home_at(key_hash(key), 1, 25) == 1
    assert _placement(SHRUNK, 5, (TOPIC, 1, 25), key) is None


def test_a_late_record_in_a_deleted_partition_after_its_drain_marker_is_dead_lettered() -> None:
    """A record placed with 8 partitions (before the shrink) whose producer paused past its
    lease lands in deleted 5 after its drain marker: late (``home_at`` is 1), so processed it
    would come after the key's newer records in 1."""
    key = _key(4, 8, 5)
    assert SHRUNK.home_at(key_hash(key), 5, 35) == 1
    reason = _placement(SHRUNK, 8, (TOPIC, 5, 35), key)
    assert reason is not None and reason.startswith("late")


def test_a_partition_grown_again_keeps_the_first_growths_fence() -> None:
    """4 -> 8 -> 5 -> 8: a record placed with 4 partitions lands in 1 after the first growth's
    marker (10) and before the shrink's hold (20): late. The processor live at the time
    dead-letters it; a rebuild after the regrowth (lost disk, replay, Spark) must too, but
    ``fences_of`` keeps only the last growth's threshold (40) per child."""
    key = _key(4, 8, 5)
    assert REGROWN.home_at(key_hash(key), 1, 15) == 5
    live = _placement(GROWN, 4, (TOPIC, 1, 15), key)
    assert live is not None and live.startswith("late")
    rebuilt = _placement(REGROWN, 4, (TOPIC, 1, 15), key)
    assert rebuilt is not None and rebuilt.startswith("late")


# -- markers of the step in progress -------------------------------------------------------------


def test_a_marker_written_before_the_fence_ended_does_not_fence() -> None:
    """4 -> 8 recorded, fence ends recorded at 100 in every parent. A record with the marker
    header of child 5 at offset 50 of parent 1 was written during the lease wait (by anyone
    who may write the input: ``expand`` writes its markers only after the fence ends), so
    old-count records of 5's keys still landed after it. Taken as the marker, its offset is
    the fence and those records become late."""
    history = TopicHistory(TOPIC, (4,)).grown(8, dict.fromkeys(range(4, 8), 0))
    growth = Growth(8, 0, fence_ends=dict.fromkeys(range(4), 100))
    headers: list[tuple[str, bytes | None]] = [(MARKER_HEADER, f"{TOPIC}/1/8/5".encode())]
    where = (TOPIC, 1, 50)
    refused = unrecorded_marker(where, headers, history, growth)
    assert refused is not None and "lies before that step's fence end" in refused, refused
    assert unrecorded_marker((TOPIC, 1, 100), headers, history, growth) is None  # at the end
