"""Which registry record of a topic supersedes the entry read before it: the first record of
each fact wins.

Kafka appends without a compare-and-set, so two runs of ``splitstate expand`` at once (a second
terminal, a retried job, a rival operator) can each write an entry built from their own copy:
a run that finishes a change after another run already recorded the next one would write the
old history back, and two runs that measured a step at different times would each write their
own starts or holds. Every reader folds a topic's records in log order and keeps a record only
when it *supersedes* the entry kept so far: it goes further through the topic's changes and
agrees with every fact already recorded. So every reader sees the same entry (the log order
decides, not who read when), a history never goes backwards, and a step's starts, holds, fence
ends and count-record time are the first ones recorded. A writer reads the registry again
after each write and goes on from what was kept (``framework.growth.expand``).

The settings writers take once at their start (the key hash, ``lease_ms``,
``delivery_timeout_ms``) are facts too, recorded by the first registration; ``compacted`` may
only turn on. A record that changes none of those facts (the same progress, the same steps)
is kept (an identical copy).
"""

from __future__ import annotations

from dataclasses import replace

from framework.coordination.topic_entry import Announcement, Growth, TopicEntry
from rebalance.steps import Grow, Step

__all__ = ["progress", "supersedes"]

#: how far through its current change an entry is, after its history's last count
_RECORDED, _FENCED, _DONE = 1, 2, 3


def progress(entry: TopicEntry) -> tuple[int, int]:
    """How far ``entry`` is through its topic's changes, ordered: ``(counts, stage)``; a
    change announced counts as the next count at stage 0, then it is recorded (1), fenced (2)
    and done (3: its markers recorded, or no change)."""
    counts = len(entry.history.counts)
    if entry.announced is not None:
        return counts + 1, 0
    if entry.growth is None:
        return counts, _DONE
    return counts, _FENCED if entry.growth.fence_ends is not None else _RECORDED


def supersedes(record: TopicEntry, current: TopicEntry) -> bool:
    """Whether ``record``, read after ``current`` (the entry kept so far), is kept instead:
    it is at least as far through the topic's changes and contradicts none of the facts
    ``current`` recorded (see the module docstring)."""
    if progress(record) < progress(current):
        return False  # a history going backwards: a run writing from an older copy
    return _agrees(record, current)


def _agrees(record: TopicEntry, current: TopicEntry) -> bool:
    """Whether ``record`` keeps every fact ``current`` recorded."""
    if _settings(record) != _settings(current) or (current.compacted and not record.compacted):
        return False  # recorded once, at the first registration (``compacted`` may turn on)
    before, after = current.history, record.history
    if after.counts[: len(before.counts)] != before.counts:
        return False
    pending = len(before.steps) - 1 if current.growth is not None else None
    for index, (kept, then) in enumerate(zip(before.steps, after.steps, strict=False)):
        same = _measured(kept) == _measured(then) if index == pending else kept == then
        if not same:  # (a pending step's markers may be recorded since, nothing else)
            return False
    if current.announced is not None:
        return _keeps_announcement(record, current.announced, len(before.counts))
    if current.growth is not None and len(after.counts) == len(before.counts):
        return _keeps_change(record.growth, current.growth)
    return True


def _keeps_announcement(record: TopicEntry, change: Announcement, counts: int) -> bool:
    """Whether ``record`` announces ``change`` too, or recorded its count (at ``counts``)."""
    if record.announced is not None:
        return record.announced == change
    after = record.history.counts
    if len(after) <= counts:
        return False
    grows = after[counts] > after[counts - 1]
    return after[counts] == change.partitions and grows == (change.kind == "grow")


def _keeps_change(then: Growth | None, change: Growth) -> bool:
    """Whether the change ``then`` (of the same step) is ``change`` as recorded, maybe done
    (``None``: its markers recorded) or fenced since."""
    if then is None:
        return True
    recorded = (change.partitions, change.kind, change.recorded_ms)
    if (then.partitions, then.kind, then.recorded_ms) != recorded:
        return False
    return change.fence_ends is None or then.fence_ends == change.fence_ends


def _settings(entry: TopicEntry) -> tuple[str, int, int]:
    """What writers take once, at their start: the key hash, the lease, the delivery timeout."""
    return entry.key_hash, entry.lease_ms, entry.delivery_timeout_ms


def _measured(step: Step) -> Step:
    """What a step records when its count is: the count and its starts or holds, without the
    markers written later."""
    if isinstance(step, Grow):
        return replace(step, markers={})
    return replace(step, drains={})
