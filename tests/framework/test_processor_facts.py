"""What status shows of processors whose state is on another host: from their reports, with
where they run (host, pid) only from the report of a running processor that is not silent:
its next report not overdue and, on this machine, its pid alive."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from framework.coordination.progress_reports import (
    GRACE_SECONDS,
    HEARTBEAT_SECONDS,
    ProcessorReport,
    pid_space,
)
from framework.ops.processor_facts import ProcessorFacts
from tests.sim.app import make_app

NOW = 10_000.0


def report(
    processor: int,
    *,
    age: float = 1.0,
    stopped: bool = False,
    every: float = HEARTBEAT_SECONDS,
    pid: int | None = None,
    space: str | None = None,
    now: float = NOW,
) -> ProcessorReport:
    return ProcessorReport(
        processor,
        f"host-{processor}",
        100 + processor if pid is None else pid,
        now - age,
        state_bytes=5000,
        catch_up_generation=2,
        catch_up={("in", 1): 70},
        transfer={"processor": processor, "phase": "copying", "generation": 2},
        unfenced={("in", 0): 3},
        skipped=[("in", 1, 9, 3, 1.5)],
        stopped=stopped,
        every=every,
        pid_space=space,
    )


def facts(tmp_path: Path, *reports: ProcessorReport, now: float = NOW) -> ProcessorFacts:
    app = make_app(
        tmp_path, partitions=4, initial_processors=2, max_records=10, lease_ms=1000, ready_lag=0
    )
    return ProcessorFacts(app, {r.processor: r for r in reports}, now)


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
    silent = HEARTBEAT_SECONDS + GRACE_SECONDS + 1
    known = facts(tmp_path, report(0, stopped=True), report(1, age=silent))
    for processor in (0, 1):
        assert known.host(processor) is None and known.pid(processor) is None
        assert known.state_bytes(processor) == 5000  # what it last said of its state stays
    stopped, overdue = known.silence(0), known.silence(1)
    assert stopped is not None and stopped.why == "stopped"
    assert "processor 0 is not running: it stopped 1 s ago (host-0, pid 100)" in stopped.render()
    assert overdue is not None and overdue.why == "silent"
    assert overdue.render().startswith(
        "processor 1 is not reporting: its last report came 41 s ago (host-1, pid 101), one "
        "is due every 30 s"
    )


def test_a_report_is_overdue_by_its_own_cadence(tmp_path: Path) -> None:
    """During a scale a processor reports every 2 s, else every 30 s: a killed one is
    silent after its cadence and a grace, not after a fixed 90 s."""
    scaling, settled = 2.0, HEARTBEAT_SECONDS
    known = facts(
        tmp_path,
        report(0, every=scaling, age=scaling + GRACE_SECONDS - 1),
        report(1, every=scaling, age=scaling + GRACE_SECONDS + 1),
        report(2, every=settled, age=settled + GRACE_SECONDS - 1),
        report(3, every=settled, age=settled + GRACE_SECONDS + 1),
    )
    assert [known.host(j) for j in range(4)] == ["host-0", None, "host-2", None]
    assert [known.silence(j) is None for j in range(4)] == [True, False, True, False]


def test_a_killed_processor_on_this_machine_shows_no_pid_at_once(tmp_path: Path) -> None:
    """It could not say it stopped, and its report is fresh; but its pid is gone."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    now = time.time()
    here = pid_space()
    assert here is not None  # Linux
    known = facts(
        tmp_path,
        report(0, pid=gone.pid, space=here, now=now),
        report(1, pid=gone.pid, space="another-boot/pid:[1]", now=now),  # another machine's
        report(2, pid=os.getpid(), space=here, now=now),
        now=now,
    )
    assert (known.host(0), known.pid(0)) == (None, None)
    silence = known.silence(0)
    assert silence is not None and silence.why == "exited"
    assert f"its process (host-0, pid {gone.pid}) is gone" in silence.render()
    assert known.pid(1) == gone.pid  # its pids are not this machine's: its report stands
    assert known.pid(2) == os.getpid() and known.silence(2) is None


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
