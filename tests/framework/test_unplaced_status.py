"""Records a plain producer put where linear hashing never places their keys: dead-lettered,
counted in the processor's state and report, shown by ``splitstate status`` and warned of in
the processor's log -- each saying what wrote them and the fix -- at most once per input
partition per interval."""

from __future__ import annotations

import logging
from fractions import Fraction
from pathlib import Path

import pytest

from framework import App, AppConfig, KeyState, Record
from framework.coordination.progress_reports import ProcessorReport
from framework.ops.processor_facts import ProcessorFacts
from framework.ops.status import AppStatus, PartitionStatus, ProcessorStatus, collect_status
from framework.ops.status_view import render_status, warning_lines
from framework.processing import RecordProcessor, StoredMessage
from framework.runtime.loop import ProcessorRuntime
from framework.runtime.unplaced_log import WARN_EVERY_SECONDS, UnplacedWarnings
from rebalance import bucket, key_hash
from statestore import DatabaseIdentity, ProcessorDatabase
from tests.clocks import ManualClock
from tests.sim.app import INPUT, make_app
from tests.sim.one_key import KEY, one_key_world

N = 4
CAUSE = "written by a producer that does not place keys by linear hashing"
FIX = "Fix: write with framework.SplitstateProducer, or a partitioner using the same hash"


def report(processor: int, unplaced: dict[tuple[str, int], int]) -> ProcessorReport:
    return ProcessorReport(processor, "host", 7, 100.0, unplaced=unplaced)


def test_a_report_carries_the_unplaced_counts_and_an_older_one_none() -> None:
    written = report(1, {("in", 2): 4})
    assert ProcessorReport.decode(written.encode()) == written
    older = b'{"processor": 1, "host": "h", "pid": 7, "updated": 1.0}'  # before the field
    assert ProcessorReport.decode(older).unplaced == {}


def test_status_sums_the_unplaced_counts_of_every_processor(tmp_path: Path) -> None:
    app = make_app(
        tmp_path, partitions=4, initial_processors=2, max_records=10, lease_ms=1000, ready_lag=0
    )
    reports = {0: report(0, {("in", 0): 2}), 1: report(1, {("in", 0): 1, ("in", 3): 5})}
    facts = ProcessorFacts(app, reports, 101.0)
    assert facts.unplaced([0, 1]) == {("in", 0): 3, ("in", 3): 5}
    assert facts.unfenced([0, 1]) == {}


def test_status_says_what_wrote_them_and_the_fix() -> None:
    parts = [PartitionStatus("words", p, p % 2, 10, 10) for p in range(2)]
    processors = [ProcessorStatus(j, [parts[j]], Fraction(1, 2), 0, 0) for j in range(2)]
    status = AppStatus(
        "wc", 0, 2, processors, {"words": [2]}, unplaced={("words", 0): 2, ("words", 1): 1}
    )
    first, second = warning_lines(status)
    assert first == (
        "warning: 3 records without a splitstate.count header dead-lettered (stage placement), "
        "as linear hashing does not place their keys where they are: words[0] 2, words[1] 1"
    )
    assert CAUSE in second and "Kafka's default partitioner" in second and FIX in second
    assert first in render_status(status).splitlines()
    clean = AppStatus("wc", 0, 2, processors, {"words": [2]})
    assert warning_lines(clean) == []


def counting_app() -> App:
    app = App(
        AppConfig.load(
            None, app_id="unplaced", inputs=[{"topic": "in", "partitions": N}], initial_processors=1
        )
    )
    app.store("counts", int)

    @app.processor("in")
    def count(_record: Record[bytes], state: KeyState[int]) -> None:
        state.set((state.get() or 0) + 1)

    return app


def test_the_log_warns_once_per_partition_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    app = counting_app()
    database = ProcessorDatabase.in_memory(DatabaseIdentity("unplaced", 0), app.store_specs())
    records = RecordProcessor(app, {"in": N}, unplaced={("in", 3): 9})  # 9 from an earlier run
    clock = ManualClock()
    warnings = UnplacedWarnings(0, records, clock, "dead")
    key = b"user-1"
    home = bucket(key_hash(key), N, N)
    elsewhere = [p for p in range(N) if p != home]
    offsets = dict.fromkeys(range(N), 0)

    def send(partitions: list[int], *, commit: bool = True) -> None:
        batch = database.begin()
        for p in partitions:
            records.process(batch, StoredMessage("in", p, offsets[p], key, b"", None, None))
            offsets[p] += 1
        if commit:
            batch.commit()
        else:
            batch.abort()

    def lines() -> list[str]:
        found = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        caplog.clear()
        return found

    caplog.set_level(logging.WARNING)
    warnings.check()
    assert lines() == []  # the earlier run's records are not warned of again
    send([home, *elsewhere[:2], elsewhere[0]])
    send([elsewhere[2]], commit=False)  # not committed: not counted, not warned of
    warnings.check()
    first = lines()
    assert len(first) == 2, first
    assert first[0].startswith(
        f"processor 0 dead-lettered 2 records of in[{elsewhere[0]}] (stage placement; 2 in all"
    )
    assert f"dead-lettered 1 record of in[{elsewhere[1]}]" in first[1]
    assert CAUSE in first[0] and FIX in first[0] and "dead-letter topic dead" in first[0]
    send([elsewhere[0]] * 5)
    warnings.check()
    assert lines() == []  # within the interval: one line per partition at most
    clock.now += WARN_EVERY_SECONDS
    warnings.check()
    assert [line.split(" (")[0] for line in lines()] == [
        f"processor 0 dead-lettered 5 records of in[{elsewhere[0]}]"
    ]
    warnings.check()
    assert lines() == []


def test_a_run_dead_letters_them_warns_and_status_shows_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The runtime on the in-memory Kafka: records of ``KEY`` (placed in partition 0) also
    in partition 1, without the header, as a plain producer writes them."""
    kafka, app = one_key_world(tmp_path, records=5, seed=2, exactly_once=False)
    for seq in range(3):
        record = {"key": KEY, "value": f"p:{10 + seq}".encode(), "headers": ()}
        kafka.broker.append((INPUT, 1), {**record, "timestamp_ms": 0, "origin": "plain"})
    caplog.set_level(logging.WARNING)
    stats = ProcessorRuntime(app, 0, kafka=kafka).run(until=lambda s: s.records >= 8)
    assert (stats.records, stats.dead_letters) == (8, 3)
    letters = kafka.broker.records(app.config.dead_letters, 0)
    assert [(dict(r.headers)["splitstate.stage"], r.key) for r in letters] == [
        (b"placement", KEY)
    ] * 3
    warned = [r.getMessage() for r in caplog.records if "dead-lettered 3 records" in r.getMessage()]
    assert len(warned) == 1 and f"of {INPUT}[1]" in warned[0] and CAUSE in warned[0], warned
    shown = render_status(collect_status(app, kafka))
    assert "3 records without a splitstate.count header dead-lettered" in shown, shown
    assert f"{INPUT}[1] 3" in shown and FIX in shown
