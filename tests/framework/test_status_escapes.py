"""Text that ``splitstate status`` reads from the control log, the progress topic and the
snapshot store reaches the terminal escaped: no escape sequence, carriage return or forged
line from an abort reason or a report's host, and no rich markup in the live view."""

from __future__ import annotations

import io
import time
from fractions import Fraction
from pathlib import Path

import orjson
import pytest
from rich.console import Console

from framework.coordination.control_log import ControlLog
from framework.errors import SplitstateError
from framework.ops.cli import main
from framework.ops.cli.snapshot import describe
from framework.ops.escape import printable
from framework.ops.processor_facts import BootstrapStatus, Silence
from framework.ops.snapshot_status import SnapshotReport
from framework.ops.status import AppStatus, PartitionStatus, ProcessorStatus, collect_status
from framework.ops.status_live import live_status
from framework.ops.status_view import render_status
from framework.ops.status_watch import watch_status
from framework.ops.stops import StoppedReceiver
from framework.ops.terminal import terminal
from framework.runtime.loop import ProcessorRuntime
from framework.snapshots.transfer_progress import TransferProgress
from rebalance.control_stops import Stop
from statestore.snapshot_manifest import SnapshotManifest
from tests.clocks import ManualClock
from tests.sim.one_key import one_key_world

#: retitles the window, clears the screen, hides what follows; then a forged line
EVIL = "\x1b]0;owned\x07\x1b[2J\x1b[8mhidden\r\nprocessor 9 [bold]fine[/bold]\u202e"


def _status(text: str) -> AppStatus:
    """A status whose every field read from outside holds ``text``."""
    parts = [PartitionStatus("words", p, 0, 10, 20) for p in range(2)]
    processor = ProcessorStatus(
        0,
        parts,
        Fraction(1),
        4096,
        7,
        host=f"h{text}",
        silence=Silence(0, "silent", text, 7, 100.0, 2.0),
    )
    stopped = StoppedReceiver(1, 1, Stop(text), restarted=None, released=())
    return AppStatus(
        "wc",
        1,
        1,
        [processor],
        {"words": [2]},
        2,
        [],
        bootstraps=[
            BootstrapStatus(1, text, 1, 2, 3, 4, 5.0),
            TransferProgress(1, text, 1, 2, 3, [], 0.0, 1.0),
        ],
        stopped=[stopped],
        aborted=(1, 1, 2, text),
        ignored=1,
        last_ignored=(text,),
        snapshots=SnapshotReport("store", {}, 0.0, 60.0, error=text),
    )


def _shows_nothing_raw(text: str) -> None:
    for raw in ("\x1b", "\x07", "\r", "\u202e"):
        assert raw not in text, f"{raw!r} reached the terminal: {text!r}"


def test_printable_escapes_control_and_format_characters_only() -> None:
    assert printable("proc-0.example, ünïcode 日本") == "proc-0.example, ünïcode 日本"
    assert printable("a\x1b[2J\r\n\tb\x7f\x9b\u202e\u2028") == (
        "a\\x1b[2J\\r\\n\\tb\\x7f\\x9b\\u202e\\u2028"
    )


def test_the_plain_report_escapes_every_text_read_from_outside() -> None:
    text = render_status(_status(EVIL))
    _shows_nothing_raw(text)
    # the newline in each field forges no line: as many lines as with harmless text
    assert len(text.splitlines()) == len(render_status(_status("x")).splitlines())
    assert "aborted: \\x1b]0;owned\\x07\\x1b[2J\\x1b[8mhidden\\r\\nprocessor 9" in text
    assert "STOPPED catching up as a whole: \\x1b]0;owned" in text
    assert "  - \\x1b]0;owned" in text  # the control log's ignored record
    assert "cannot read the store: \\x1b]0;owned" in text


def test_the_live_view_escapes_text_and_reads_no_markup_in_it() -> None:
    console = Console(file=io.StringIO(), width=400, record=True, color_system=None)
    console.print(live_status(_status(EVIL), [], updated="12:00:00", every=2, problem=EVIL))
    text = console.export_text()
    _shows_nothing_raw(text)
    # markup in a reason or a host is shown as it is, not applied
    assert text.count("[bold]fine[/bold]") >= 8
    assert "aborted: \\x1b]0;owned" in text
    assert "cannot refresh: \\x1b]0;owned" in text


class _RefreshError(SplitstateError):
    """A refresh failing with text read from outside."""


def test_the_plain_watch_escapes_a_refresh_problem() -> None:
    calls = iter([_status("x")])

    def collect() -> AppStatus:
        for status in calls:
            return status
        raise _RefreshError(EVIL)

    out = io.StringIO()
    assert watch_status(collect, terminal(out), 1.0, clock=ManualClock(), rounds=2) == 0
    _shows_nothing_raw(out.getvalue())
    assert "cannot refresh: \\x1b]0;owned" in out.getvalue()


def test_status_of_a_run_escapes_an_abort_reason_and_a_reported_host(tmp_path: Path) -> None:
    kafka, app = one_key_world(tmp_path, records=3, seed=1, exactly_once=False)
    ProcessorRuntime(app, 0, kafka=kafka).run(until=lambda s: s.records >= 3)
    ControlLog(kafka, app.config.control_topic).append(
        {
            "type": "scale",
            "generation": 1,
            "processors": 2,
            "partitions": {"sim-in": 2},
            "request": "r",
        },
        {"type": "abort", "generation": 1, "reason": EVIL},
    )
    report = {"processor": 0, "host": f"h{EVIL}", "pid": 1, "updated": time.time()}
    kafka.append(app.config.progress_topic, [(b"processor/0", orjson.dumps(report))])
    text = render_status(collect_status(app, kafka))
    _shows_nothing_raw(text)
    assert "aborted: \\x1b]0;owned" in text


def test_a_command_error_is_printed_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "state\x1b]0;owned\x07"
    assert main(["state", "dump", "--dir", str(missing)]) == 2
    error = capsys.readouterr().err
    _shows_nothing_raw(error)
    assert "state\\x1b]0;owned\\x07 does not exist" in error


def test_snapshot_lines_are_escaped() -> None:
    manifest = SnapshotManifest("wc", 0, {}, "0000000000001-abcdef01", 0.0, 1, {(EVIL, 0): 5})
    line = describe(manifest, 10.0)
    _shows_nothing_raw(line)
    assert "\\x1b]0;owned" in line and "\n" not in line
