"""Live views without a broker: the terminal decision, the status view, the watch loop in both
modes, and the progress bars' plain lines (fence countdown, backfill)."""

from __future__ import annotations

import io
import os
import signal
import time
from collections.abc import Iterator
from fractions import Fraction

import pytest
from rich.console import Console

from framework.bootstrap import BootstrapProgress
from framework.kafka.errors import KafkaIOError
from framework.ops.bars import ProgressView, wait_with_countdown
from framework.ops.cli import main
from framework.ops.cli.backfill import BackfillProgress
from framework.ops.progress import CatchUpProgress
from framework.ops.status import (
    AppStatus,
    BootstrapStatus,
    HandoffStatus,
    PartitionStatus,
    ProcessorStatus,
)
from framework.ops.status_live import live_status
from framework.ops.status_watch import watch_status
from framework.ops.terminal import Terminal, terminal
from framework.snapshots.transfer_progress import TransferProgress
from tests.clocks import ManualClock

ESC = "\x1b"


class FakeTTY(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """What rich reads from the environment, as on an ordinary terminal."""
    for name in ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")


def status(t2: int = 200, committed: int = 40) -> AppStatus:
    """Two processors over words[0..3], scaling to 3 (0 -> 2 moves words[2])."""
    parts = [PartitionStatus("words", p, p % 2, committed, 100) for p in range(4)]
    processors = [
        ProcessorStatus(j, [p for p in parts if p.owner == j], Fraction(1, 2), 4096 * (j + 1), 7)
        for j in range(2)
    ]
    handoff = HandoffStatus(0, 2, "CATCHING_UP", [("words", 2, 1000, t2, None)])
    spark = BootstrapStatus(2, "fold", 3, 8, 5000, 4000, 12.0)
    transfer = TransferProgress(2, "copying", 1 << 20, 4 << 20, 10, [], 0.0, 3.0)
    return AppStatus(
        "wc", 1, 2, processors, {"words": [4]}, 3, [handoff], bootstraps=[spark, transfer]
    )


def test_a_pipe_is_plain_and_a_terminal_live() -> None:
    piped = terminal(io.StringIO())
    assert not piped.live
    piped.line("[bold]x[/bold]")  # no markup, no escapes
    stream = piped.console.file
    assert isinstance(stream, io.StringIO)
    assert stream.getvalue() == "[bold]x[/bold]\n"
    assert terminal(FakeTTY()).live


def test_term_dumb_is_plain_and_no_color_keeps_the_redraw(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TERM", "dumb")
    assert not terminal(FakeTTY()).live
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("NO_COLOR", "1")
    colourless = terminal(FakeTTY())
    assert colourless.live and colourless.console.no_color


def test_the_live_view_shows_processors_lag_and_bars() -> None:
    progress = CatchUpProgress()
    progress.update(status(t2=200), now=0.0)
    handoffs = progress.update(status(t2=600), now=2.0)
    console = Console(file=io.StringIO(), width=160, record=True, color_system=None)
    console.print(live_status(status(600), handoffs, updated="12:00:00", every=2))
    text = console.export_text()
    assert "app wc: generation 1, 2 processors (initial 2)" in text
    rows = [line.split() for line in text.splitlines()]
    assert ["0", "-", "7", "50.0%", "4", "KiB", "120", "words[0],", "words[2]"] in rows
    assert ["1", "-", "7", "50.0%", "8", "KiB", "120", "words[1],", "words[3]"] in rows
    assert ["words[3]", "1", "40", "100", "60"] in rows
    handoff = next(line for line in text.splitlines() if "0 -> 2" in line)
    assert "CATCHING_UP" in handoff and "60%" in handoff  # 600 of 1,000
    assert "600 of 1,000" in handoff and "200" in handoff and "2s" in handoff  # 200/s, ETA 2s
    assert "━" in handoff  # the bar
    assert "Spark bootstrap" in text and "tasks 3/8" in text
    assert "snapshot transfer" in text and "1.0 of 4.0 MiB" in text
    assert "updated 12:00:00, every 2s; Ctrl-C to exit" in text


def test_watch_in_plain_mode_prints_one_report_per_refresh() -> None:
    samples = iter([status(t2=200, committed=40), status(t2=600, committed=90)])
    out = io.StringIO()
    clock = ManualClock(100.0)
    code = watch_status(lambda: next(samples), terminal(out), 2.0, clock=clock, rounds=2)
    assert code == 0
    text = out.getvalue()
    assert ESC not in text
    reports = text.split("\n\napp wc: ")
    assert len(reports) == 2
    assert reports[0].startswith("app wc: generation 1")
    assert "words[0]                         0         40        100       60" in reports[0]
    assert "words[0]                         0         90        100       10" in reports[1]
    assert "catch-up progress:" in reports[1]
    assert "T2 600 of 1,000  200/s  ETA 2s" in reports[1]  # from the two samples, 2 s apart
    assert text.endswith("\n\n")
    assert clock.sleeps == 1


def test_watch_on_a_terminal_redraws_and_ctrl_c_exits_0() -> None:
    calls = 0

    def collect() -> AppStatus:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise KeyboardInterrupt
        return status(committed=40 + calls)

    out = FakeTTY()
    assert watch_status(collect, terminal(out), 1.0, clock=ManualClock()) == 0
    text = out.getvalue()
    assert ESC in text  # drawn in place
    assert "processor" in text and "partitions" in text and "41" in text and "42" in text


def test_ctrl_c_during_a_refresh_lets_the_refresh_finish_and_ends_the_watch() -> None:
    """Ctrl-C is not raised inside a refresh (a Kafka client's call could be left half done):
    the refresh returns, its report is shown, and the watch ends with 0."""
    calls = 0
    interrupted_inside: list[BaseException] = []

    def collect() -> AppStatus:
        nonlocal calls
        calls += 1
        if calls == 2:
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)  # the handler runs here, in the main thread
            except BaseException as error:
                interrupted_inside.append(error)
                raise
        return status(committed=40 + calls)

    out = io.StringIO()
    previous = signal.getsignal(signal.SIGINT)
    assert watch_status(collect, terminal(out), 0.01, rounds=10) == 0
    assert interrupted_inside == []
    assert calls == 2  # no refresh after the Ctrl-C
    assert out.getvalue().count("app wc: ") == 2  # the interrupted refresh's report shown
    assert signal.getsignal(signal.SIGINT) is previous


def test_the_fence_countdown_in_plain_mode() -> None:
    out = io.StringIO()
    clock = ManualClock()
    with ProgressView(terminal(out), every=1.0, clock=clock) as view:
        wait_with_countdown(view, "fence wait", 3.0)
    assert clock.now == 3.0
    assert out.getvalue().splitlines() == [
        "fence wait: 3s left of 3s",
        "fence wait: 2s left of 3s",
        "fence wait: 1s left of 3s",
        "fence wait: 0s left of 3s",
    ]


def test_the_fence_countdown_on_a_terminal_draws_a_bar() -> None:
    out = FakeTTY()
    with ProgressView(terminal(out), clock=ManualClock()) as view:
        wait_with_countdown(view, "fence wait", 2.0)
    assert "fence wait" in out.getvalue() and "━" in out.getvalue()
    assert "0s left of 2s" in out.getvalue()


def test_backfill_progress_in_plain_mode() -> None:
    out = io.StringIO()
    clock = ManualClock()
    with ProgressView(terminal(out), every=5.0, clock=clock) as view:
        show = BackfillProgress(view.add("backfill starting"))
        for second, (phase, done, total, read) in enumerate(
            [
                ("fold", 0, 8, 0),
                ("fold", 2, 8, 1000),  # within 5 s of the last line: not printed
                ("fold", 8, 8, 4000),  # finishes the stage: printed
                ("write", 1, 4, 4000),  # a new phase: printed
                ("done", 0, 0, 4000),
            ]
        ):
            clock.now = float(second)
            show(BootstrapProgress(phase, done, total, read, read - 10))
    assert out.getvalue().splitlines() == [
        "backfill fold: tasks 0/8, 0 records read, -10 applied, 0 dead letters",
        "backfill fold: tasks 8/8, 4,000 records read, 3,990 applied, 0 dead letters",
        "backfill write: tasks 1/4, 4,000 records read, 3,990 applied, 0 dead letters",
        "backfill done: 4,000 records read, 3,990 applied, 0 dead letters",
    ]


def test_a_failed_command_leaves_no_half_filled_bar() -> None:
    out = FakeTTY()
    with pytest.raises(RuntimeError), ProgressView(Terminal(Console(file=out), True)) as view:
        view.add("snapshot take").update(1, 3, "1 of 3 processors answered")
        raise RuntimeError("boom")
    assert "1 of 3" not in out.getvalue().rsplit("\r", 1)[-1]


def test_a_failed_refresh_is_shown_and_the_watch_goes_on() -> None:
    def samples() -> Iterator[AppStatus]:
        yield status(committed=40)
        raise KafkaIOError("the broker at 127.0.0.1:1 cannot be reached")

    def collect() -> AppStatus:
        try:
            return next(stream)
        except StopIteration:
            return status(committed=99)

    stream = samples()
    out = io.StringIO()
    assert watch_status(collect, terminal(out), 1.0, clock=ManualClock(), rounds=3) == 0
    text = out.getvalue()
    assert "cannot refresh: the broker at 127.0.0.1:1 cannot be reached (retrying)" in text
    assert text.count("app wc: generation 1") == 2  # before and after the failure
    assert "99" in text.rsplit("cannot refresh", 1)[1]


def test_a_bad_interval_is_refused_with_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["status", "examples.wordcount.app:app", "--watch", "--interval", "0"]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert "--interval 0 must be above 0 seconds. Fix: pass e.g. --interval 2" in error
