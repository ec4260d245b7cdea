"""What `splitstate status` and `topics create` say of an input's partition history after
shrinks (issue 34): the counts, the deleted partitions and how far the group drained each,
the survivors' holds, and a shrink in progress."""

from __future__ import annotations

from framework.coordination.registry import Growth, TopicEntry
from framework.ops.topic_status import history_line, topic_status
from rebalance import Grow, Shrink, TopicHistory

GROWN = Grow(8, {4: 0, 5: 0, 6: 0, 7: 0}, {4: 10, 5: 11, 6: 12, 7: 13})
SHRUNK = Shrink(5, {1: 5120, 2: 4980, 3: 5002}, {5: 3310, 6: 3400, 7: 2900})
REGROWN = Grow(7, {5: 3311, 6: 3401}, {5: 6000, 6: 6001})


def test_a_shrunk_then_regrown_topic_shows_its_history_and_what_is_drained() -> None:
    history = TopicHistory("events", (4, 8, 5, 7), (GROWN, SHRUNK, REGROWN))
    committed = {("events", 7): 2901}
    status = topic_status(TopicEntry(history), committed, {})
    lines = status.render()
    assert lines[0] == "input events: partitions 4 -> 8 -> 5 -> 7"
    assert "  deleted: 7 (drained)" in lines
    assert not any("holds keys" in line for line in lines)  # 7 drained: 3 holds nothing
    assert history_line(history) == "4 -> 8 -> 5 -> 7 (deleted 7)"


def test_a_survivor_holds_keys_of_each_deleted_partition_until_the_group_drained_it() -> None:
    history = TopicHistory("events", (4, 8, 5), (GROWN, SHRUNK))
    committed = {("events", 5): 120, ("events", 6): 3401}
    lines = topic_status(TopicEntry(history), committed, {}).render()
    assert lines[0] == "input events: partitions 4 -> 8 -> 5"
    assert lines[2] == (
        "  deleted: 5 (draining: group at 120, drain marker at 3310), 6 (drained), "
        "7 (draining: no committed offset, drain marker at 2900)"
    )
    assert lines[3:] == [
        "  events[1] holds keys of events[5] from offset 5120 until events[5] passes offset "
        "3310 (now at 120)",
        "  events[3] holds keys of events[7] from offset 5002 until events[7] passes offset "
        "2900 (now at -)",
    ]
    assert history_line(history) == "4 -> 8 -> 5 (deleted 5..7)"


def test_a_shrink_in_progress_shows_its_pending_drain_markers() -> None:
    history = TopicHistory("events", (4, 8, 5), (GROWN, Shrink(5, SHRUNK.holds)))
    entry = TopicEntry(history, growth=Growth(5, 0, kind="shrink"))
    lines = topic_status(entry, {}, {}).render()
    assert (
        "  deleted: 5 (draining: no committed offset, drain marker not recorded yet), "
        "6 (draining: no committed offset, drain marker not recorded yet), "
        "7 (draining: no committed offset, drain marker not recorded yet)"
    ) in lines
    assert (
        "  shrinking to 5: drain markers pending for [5, 6, 7] (`splitstate expand` running, "
        "or run it again to resume)"
    ) in lines
    assert (
        "  events[2] holds keys of events[6] from offset 4980 until events[6] is drained (its "
        "drain marker is not recorded yet)"
    ) in lines
