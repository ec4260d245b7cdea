"""A partition that leaves a processor and comes back (a scale gives it away, a later one
gives it back): its ``order-mark`` stored when it left is stale (another processor read it
on); the catch-up that brings it back to F hands over its own mark at F instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework.app import App
from framework.input_times import ORDER_SCOPE
from framework.order import NO_FLOOR
from tests.clocks import ManualClock
from tests.framework.test_catchup_time_edges import FLAT, edge_world
from tests.framework.time_world import (
    TOPIC,
    Owner,
    begin_catch_up,
    read_to_f,
    released,
    scaled,
    started,
    window_app,
)


def test_a_returning_partition_resumes_from_the_catch_ups_mark_at_f(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Processor 1 read partition 1 up to offset 2 (mark 2000) before it left; it comes back
    by a catch-up to F. The mark stored at 2 is not the partition's mark at F: the catch-up
    reads the partition's marks (the tick at F - 1, floor 30 000, is the largest time
    before F) and hands them over at F. The catch-up world has one input: the app is taken
    for one in the canonical order (``ordered``), as only such an app's catch-up keeps
    marks."""
    canonical = lambda app: isinstance(app, App)  # noqa: E731
    monkeypatch.setattr("framework.runtime.catchup.ordered", canonical)
    app = window_app(tmp_path, partitions=2, initial=1)
    kafka, _keys, final = edge_world(tick_at_f=False)
    receiver = Owner(app, 1)
    batch = receiver.database.begin()
    batch.set_offset(TOPIC, 1, 2)
    batch.set_progress(ORDER_SCOPE, TOPIC, 1, 2_000)
    batch.commit()
    state = released(scaled(started("timed", 1, 2), 1, 2, FLAT), 0, 1, {1: final})
    kafka.broker.groups["timed"] = {(TOPIC, 1): final}
    catchup = begin_catch_up(kafka, app, state, 1, receiver.database)
    clock = kafka.clock
    assert isinstance(clock, ManualClock)
    for _ in range(5):
        catchup.step(4)
        clock.now += 1
    read_to_f(kafka, app, state, catchup)
    catchup.complete(state.scaling.handoffs[(0, 1)])  # type: ignore[union-attr]
    assert receiver.database.offsets() == {(TOPIC, 1): final}
    assert receiver.database.progress(ORDER_SCOPE).get((TOPIC, 1), NO_FLOOR) == 30_000
