"""A receiver's run counts the records its catch-up read (``RuntimeStats.replayed``), which
bench/catchup.py times against live processing."""

from __future__ import annotations

from pathlib import Path

from framework.coordination.scaling import request_scale
from framework.runtime.loop import ProcessorRuntime, RuntimeStats
from tests.sim.app import INPUT
from tests.sim.one_key import one_key_world

RECORDS = 30


class _Until:
    """``until`` for a run: ``done(stats)``; fails a run that never gets there."""

    def __init__(self, field: str, count: int) -> None:
        self.field, self.count, self.steps = field, count, 0

    def __call__(self, stats: RuntimeStats) -> bool:
        self.steps += 1
        assert self.steps < 5_000, f"{getattr(stats, self.field)} of {self.count} {self.field}"
        return bool(getattr(stats, self.field) >= self.count)


def test_a_receivers_run_counts_the_records_its_catch_up_read(tmp_path: Path) -> None:
    """Processor 0 of 1 processes ``RECORDS`` records of input partition 1; after a scale to
    2, processor 1 gains partition 1 and its run reads them all in its catch-up (restore mode:
    none counted as processed), and processor 0's run read none in a catch-up."""
    kafka, app = one_key_world(tmp_path, records=0, seed=5, exactly_once=False)
    for seq in range(1, RECORDS + 1):
        record = {"key": b"k", "value": f"p:{seq}".encode(), "headers": ()}
        kafka.broker.append((INPUT, 1), {**record, "timestamp_ms": 0, "origin": "p"})
    live = ProcessorRuntime(app, 0, kafka=kafka).run(until=_Until("records", RECORDS))
    assert (live.records, live.replayed) == (RECORDS, 0)
    request_scale(app, 2, kafka=kafka)
    joiner = ProcessorRuntime(app, 1, kafka=kafka).run(until=_Until("replayed", RECORDS))
    assert (joiner.replayed, joiner.records) == (RECORDS, 0)
