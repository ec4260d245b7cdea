"""What status shows of processors whose state is on another host: from their reports, with
where they run (host, pid) only from a recent report of a running processor."""

from __future__ import annotations

from pathlib import Path

from framework.coordination.progress_reports import ProcessorReport
from framework.ops.processor_facts import STALE_SECONDS, ProcessorFacts
from tests.sim.app import make_app

NOW = 10_000.0


def report(processor: int, *, age: float = 1.0, stopped: bool = False) -> ProcessorReport:
    return ProcessorReport(
        processor,
        f"host-{processor}",
        100 + processor,
        NOW - age,
        state_bytes=5000,
        catch_up_generation=2,
        catch_up={("in", 1): 70},
        transfer={"processor": processor, "phase": "copying", "generation": 2},
        unfenced={("in", 0): 3},
        skipped=[("in", 1, 9, 3, 1.5)],
        stopped=stopped,
    )


def facts(tmp_path: Path, *reports: ProcessorReport) -> ProcessorFacts:
    app = make_app(
        tmp_path, partitions=4, initial_processors=2, max_records=10, lease_ms=1000, ready_lag=0
    )
    return ProcessorFacts(app, {r.processor: r for r in reports}, NOW)


def test_a_processor_on_another_host_is_known_by_its_report(tmp_path: Path) -> None:
    known = facts(tmp_path, report(1))
    assert (known.host(1), known.pid(1), known.state_bytes(1)) == ("host-1", 101, 5000)
    assert known.catch_up(1, 2) == {("in", 1): 70}
    assert known.catch_up(1, 3) == {}  # another generation's T2 is not this one's
    transfer = known.transfer(1, 2)
    assert transfer is not None and transfer.phase == "copying"
    assert known.transfer(1, 3) is None
    assert [(s.offset, s.crashes) for s in known.skipped(1)] == [(9, 3)]
    assert known.host(0) is None and known.state_bytes(0) is None


def test_a_stopped_or_silent_processor_shows_no_host_or_pid(tmp_path: Path) -> None:
    known = facts(tmp_path, report(0, stopped=True), report(1, age=STALE_SECONDS + 1))
    for processor in (0, 1):
        assert known.host(processor) is None and known.pid(processor) is None
        assert known.state_bytes(processor) == 5000  # what it last said of its state stays


def test_unfenced_records_sum_every_reported_processor_once(tmp_path: Path) -> None:
    known = facts(tmp_path, report(0), report(1), report(4, stopped=True))  # 4: scaled in
    assert known.unfenced([0, 1]) == {("in", 0): 9}


def test_state_here_that_cannot_be_read_is_told_by_the_report(tmp_path: Path) -> None:
    """A local state directory that does not open (damaged, or another tool's) never makes
    status show less than the processor's report says."""
    known = facts(tmp_path, report(1))
    damaged = tmp_path / "processor-1"
    damaged.mkdir(parents=True)
    (damaged / "CURRENT").write_text("MANIFEST-000009\n")  # names a manifest that is not there
    assert known._local(1)
    assert [(s.offset, s.crashes) for s in known.skipped(1)] == [(9, 3)]
    assert known.unfenced([0, 1]) == {("in", 0): 3}
    assert known.catch_up(1, 2) == {("in", 1): 70}
