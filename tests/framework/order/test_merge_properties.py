"""``MergeBuffer`` against the canonical order computed by hand from random logs
(``tests.framework.order.world``): 2-3 inputs with different partition counts, random keys,
out-of-order event times, records without one, ticks, entries that are not items, read in
random interleavings and chunk sizes, released at random points."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from framework.order import ENDED
from tests.framework.order.world import (
    TICK,
    Check,
    Entry,
    Log,
    Reader,
    Step,
    items_before,
    logs,
    mark_at,
    per_key,
    reference,
)
from tests.framework.order.world import schedules as schedules_

SETTINGS = settings(max_examples=200)


def _end_all(reader: Reader, log: Log) -> None:
    for position, end in log.ends().items():
        reader.buffer.end(position, end)
    reader.release()


@SETTINGS
@given(logs(), schedules_)
def test_a_live_reader_releases_each_keys_canonical_order(log: Log, schedule: list[Step]) -> None:
    """(a) Live (no ends): after every release each key's items are a prefix of its canonical
    order; once every partition is read up to its end, all of it, in that order."""
    reader = Reader(log)
    check = Check(log)
    reader.drive(schedule, log.ends(), check)
    _end_all(reader, log)
    check(reader)
    assert per_key(log, reader.released) == reference(log)


@SETTINGS
@given(logs(), schedules_, st.integers(0, 40), schedules_)
def test_b_a_restart_from_any_committed_prefix_goes_on_identically(
    log: Log, schedule: list[Step], commit_at: int, later: list[Step]
) -> None:
    """(b) A reader restarted from what the buffer committed at any point (applied positions,
    their marks as bases) applies the rest so that each key's sequence is the canonical one;
    the stored marks are the marks the log gives there."""
    first = Reader(log)
    first.drive(schedule[:commit_at], log.ends(), Check(log), finish=False)
    applied = first.buffer.applied_positions()
    marks = first.buffer.applied_marks()
    before = per_key(log, first.released)
    for position, offset in applied.items():
        released = [(item.position, item.offset) for item in first.released]
        assert [ref for ref in released if ref[0] == position] == items_before(
            log, position, offset
        )
        assert marks[position] == mark_at(log, position, offset)
    second = Reader(log, starts=applied, bases=marks)
    check = Check(log, before)
    second.drive(later, log.ends(), check)
    _end_all(second, log)
    check(second)
    assert {k: before[k] + s for k, s in per_key(log, second.released).items()} == reference(log)


@SETTINGS
@given(
    logs(), schedules_, st.lists(st.integers(0, 40), min_size=2, max_size=2), schedules_, schedules_
)
def test_c_a_reader_with_ends_applies_committed_prefixes_then_goes_on_live(
    log: Log, schedule: list[Step], commits: list[int], catch_up: list[Step], live: list[Step]
) -> None:
    """(c) A reader from the start with ends at a committed prefix applies exactly that prefix,
    in canonical order, without waiting; moving the ends to a later committed prefix (a catch-up
    chunk by chunk) applies exactly that one; lifting the ends and reading on live gives each
    key what a reader that never stopped gives."""
    first_commit, second_commit = sorted(commits)
    first = Reader(log)
    first.drive(schedule[:first_commit], log.ends(), Check(log), finish=False)
    prefixes = [(first.buffer.applied_positions(), per_key(log, first.released))]
    first.drive(schedule[first_commit:second_commit], log.ends(), Check(log), finish=False)
    prefixes.append((first.buffer.applied_positions(), per_key(log, first.released)))
    reader = Reader(log)
    for prefix, committed in prefixes:
        for position, end in prefix.items():
            reader.buffer.end(position, end)
        reader.drive(catch_up, prefix, Check(log))
        assert per_key(log, reader.released) == committed
        assert all(reader.buffer.pending(position) == 0 for position in prefix)
    for position in log.partitions:
        reader.buffer.end(position, None)
    check = Check(log)
    reader.drive(live, log.ends(), check)
    _end_all(reader, log)
    check(reader)
    assert per_key(log, reader.released) == reference(log)


@SETTINGS
@given(logs(), schedules_, st.data())
def test_d_an_idle_partition_blocks_until_a_tick_of_the_floor_it_needs(
    log: Log, schedule: list[Step], data: st.DataObject
) -> None:
    """(d) Progress: every partition read and ended but one idle partition ``Q``: whatever is
    left waits on ``Q`` alone, ``blocking`` names it (caught up, nothing waiting), and a tick
    appended to ``Q`` with ``floor`` = what it ``needs`` releases the head; repeating it
    releases everything, in the canonical order of the log with those ticks."""
    idle = data.draw(st.sampled_from(sorted(log.partitions)))
    reader = Reader(log)
    reader.drive(schedule, log.ends(), Check(log))
    for position, end in log.ends().items():
        if position != idle:
            reader.buffer.end(position, end)
    reader.release()
    while any(reader.buffer.pending(position) for position in log.partitions):
        blocking = reader.buffer.blocking(log.ends())
        assert blocking is not None
        assert blocking.missing == ()
        assert [b.position for b in blocking.blockers] == [idle]
        (blocker,) = blocking.blockers
        assert blocker.caught_up and blocker.pending == 0 and blocker.mark < blocker.needs
        assert blocker.needs in (blocking.head.mark, blocking.head.mark + 1)
        log.partitions[idle].append(Entry(TICK, None, blocker.needs))  # the forced wait
        reader.feed(idle, 1, len(log.partitions[idle]))
        assert blocking.head in reader.release()
    assert reader.buffer.blocking() is None
    assert per_key(log, reader.released) == reference(log)


@SETTINGS
@given(logs(), schedules_)
def test_with_every_partition_ended_nothing_waits(log: Log, schedule: list[Step]) -> None:
    """(d) A reader whose partitions are all ended releases every item: ``R`` is ``ENDED``."""
    reader = Reader(log)
    for position, end in log.ends().items():
        reader.buffer.end(position, end)
    reader.drive(schedule, log.ends(), Check(log))
    assert reader.buffer.blocking() is None
    assert all(reader.buffer.pending(position) == 0 for position in log.partitions)
    assert per_key(log, reader.released) == reference(log)
    assert max((i.mark for i in reader.released), default=0) < ENDED
