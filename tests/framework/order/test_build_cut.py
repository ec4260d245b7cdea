"""Where a bulk build of a canonically ordered app stops (``bootstrap.order_cut``): exactly
what a live merge buffer that read the whole history releases, with the marks it commits."""

from __future__ import annotations

import random

import pytest

from framework.bootstrap.build import check_orderable
from framework.bootstrap.errors import BootstrapError
from framework.bootstrap.order_cut import Applied, applied_prefix
from framework.coordination.registry import TopicEntry
from framework.order import NO_FLOOR, MergeBuffer, running_marks
from rebalance import TopicHistory
from rebalance.positions import Position
from tests.framework.order.appending_app import appending_app

INPUTS = ("a", "b", "c")


def _log(rng: random.Random) -> dict[Position, list[int | None]]:
    """Event times per partition (``None``: an item without one), 1-2 partitions per input
    (the last input sometimes left out: then nothing is released)."""
    topics = INPUTS if rng.random() < 0.7 else INPUTS[:2]
    log: dict[Position, list[int | None]] = {}
    for topic in topics:
        for partition in range(rng.randint(1, 2)):
            clock = rng.randint(0, 50)
            times: list[int | None] = []
            for _ in range(rng.randint(0, 12)):
                clock += rng.randint(0, 20)
                times.append(None if rng.random() < 0.15 else clock - rng.choice([0, 0, 30]))
            log[(topic, partition)] = times
    return log


@pytest.mark.parametrize("seed", range(300))
def test_the_build_stops_where_a_merge_buffer_that_read_everything_stops(seed: int) -> None:
    rng = random.Random(seed)
    log = _log(rng)
    inputs = INPUTS
    buffer: MergeBuffer[None] = MergeBuffer(inputs)
    for position in log:
        buffer.assign(position, 0)
    for position, times in log.items():
        for offset, time in enumerate(times):
            buffer.add(position, offset, b"k", time, None)
    buffer.release()
    marks = {position: running_marks(times) for position, times in log.items()}
    expected = {
        position: Applied(offset, buffer.applied_marks()[position])
        for position, offset in buffer.applied_positions().items()
    }
    assert applied_prefix(marks, inputs, log) == expected


def test_an_input_without_partitions_holds_everything() -> None:
    marks = {("a", 0): [5, 9]}
    assert applied_prefix(marks, ("a", "b"), marks) == {("a", 0): Applied(0, NO_FLOOR)}


def test_a_deleted_partition_bounds_nothing() -> None:
    """(Its mark stays low for ever: the others' records would wait for it.)"""
    marks = {("a", 0): [5, 9], ("b", 0): [20], ("b", 1): [1]}
    bounding = [("a", 0), ("b", 0)]
    assert applied_prefix(marks, ("a", "b"), bounding) == {
        ("a", 0): Applied(2, 9),
        ("b", 0): Applied(0, NO_FLOOR),  # 20 waits for a mark of a above 20
        ("b", 1): Applied(1, 1),
    }


def test_a_canonical_app_that_keeps_time_is_not_built_by_spark() -> None:
    """(Its ticks would be applied in lineage order, not canonically: refused, not wrong.)"""
    app = appending_app()
    app.store("expiring", ttl=True)
    with pytest.raises(BootstrapError, match="does not yet apply its ticks in the canonical"):
        check_orderable(app)
    check_orderable(appending_app())  # no time: built
    timed = appending_app("arrival")
    timed.store("expiring", ttl=True)
    check_orderable(timed)  # arrival: built as before


def test_a_canonical_app_whose_input_shrank_is_not_built_by_spark() -> None:
    """(Its survivors' marks would not take their deleted partitions' final marks, as the
    live loop's do: refused, not wrong.)"""
    shrunk = {"b": TopicEntry(TopicHistory.of("b", [1, 2], {1: 0}).shrunk(1, {0: 2}))}
    with pytest.raises(BootstrapError, match=r"input\(s\) \['b'\] shrank"):
        check_orderable(appending_app(), shrunk)
    check_orderable(appending_app(), {"b": TopicEntry(TopicHistory.of("b", [1, 2], {1: 0}))})
    check_orderable(appending_app("arrival"), shrunk)  # arrival: built as before


def test_with_one_input_everything_is_applied() -> None:
    marks = {("a", 0): [5, 9], ("a", 1): [3]}
    assert applied_prefix(marks, ("a",), marks) == {
        ("a", 0): Applied(2, 9),
        ("a", 1): Applied(1, 3),
    }
