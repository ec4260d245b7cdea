"""Records that kill the processor under ``time.input_order: canonical``: the live loop's merge
releases at most one record per batch while crash suspects remain, so a death counts against
the record that killed it alone and only that record is skipped at ``crash_limit``, as under
``arrival`` (the catch-up's side: ``test_review_catchup_order``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from framework import App, Record
from framework.runtime.crashes import skipped_records
from statestore import ProcessorDatabase, processor_path
from tests.framework.order import live_world as world
from tests.framework.order.live_world import CLICKS, VIEWS
from tests.sim.broker import StoredRecord
from tests.sim.kafka import NoFaults


class Died(BaseException):
    """The process died (what no ``except Exception`` catches)."""


def _killed_by(tmp_path: Path, topic: str, offset: int) -> App:
    """``live_world``'s app whose function kills the process on ``topic[0]@offset``
    (``crash_limit`` 2)."""
    settings = world.config(tmp_path, "canonical").model_copy(update={"crash_limit": 2})
    app = App(settings)
    app.store("seen")

    @app.processor(stores=["seen"])
    def see(record: Record[bytes], state: Any) -> None:
        if (record.topic, record.offset) == (topic, offset):
            raise Died(f"{topic}@{offset}")
        state.set([*(state.get() or []), f"{record.topic}@{record.offset}"])

    return app


class _ClicksFirst(NoFaults):
    """Each run's consumer gets nothing of views until it fetched two records of clicks."""

    def __init__(self) -> None:
        self.clicks = 0

    def before(self, operation: str) -> str | None:
        if operation == "kafka.consumer":
            self.clicks = 0
        return None

    def starved(self, topic: str) -> bool:
        return topic == VIEWS and self.clicks < 2

    def cut(self, topic: str, found: list[StoredRecord]) -> list[StoredRecord]:
        if topic == CLICKS:
            self.clicks += len(found)
        return found


def test_the_live_loop_skips_only_the_record_that_kills_it(tmp_path: Path) -> None:
    """clicks: k at 100 ms (clicks@0, it kills the process every time), j at 200 ms; views:
    y at 10 ms, k at 150 ms, read after both clicks (one record per fetch while suspects
    remain): the read of views@1 lets k's click and k's view go together (views reach 150,
    clicks 200), each alone in its partition's range. After ``crash_limit`` (2) deaths the
    click alone is skipped (a dead letter), and the views are applied (before, the view
    released with it was counted and skipped too)."""
    kafka = world.memory_kafka(_ClicksFirst())
    world.append(kafka, CLICKS, b"k", 100)
    world.append(kafka, CLICKS, b"j", 200)
    world.append(kafka, VIEWS, b"y", 10)
    world.append(kafka, VIEWS, b"k", 150)
    run = world.Run(_killed_by(tmp_path, CLICKS, 0), kafka)
    for _run in range(6):
        try:
            run.until({b"k": 1, b"y": 1}, seconds=30.0)
        except Died:
            continue
        break
    assert run.applied([b"k", b"y"]) == [["views@1"], ["views@0"]]
    path = processor_path(run.app.config.app_state_dir, 0)
    database = ProcessorDatabase.open_read_only(path)
    try:
        skipped = [(s.topic, s.partition, s.offset) for s in skipped_records(database)]
    finally:
        database.close()
    assert skipped == [(CLICKS, 0, 0)]
