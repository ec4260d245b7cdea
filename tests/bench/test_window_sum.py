"""bench/window_sum.py: the sums it expects, the check that refuses different results, and a
tiny splitstate-only run on the real broker printing its table (the Quix side needs its own
virtualenv, installed on demand from the package index: not part of the suite)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bench import window_sum
from bench.throughput_runs import Timing
from bench.window_input import MINUTE, WindowSums
from bench.window_sum import Run, check

ROOT = Path(__file__).resolve().parents[2]


def test_every_minute_of_a_key_closes_but_its_last_one_at_its_end() -> None:
    sums = WindowSums()
    for key, at, value in [
        (b"a", 5, 1),
        (b"b", 10, 7),
        (b"a", MINUTE - 1, 2),
        (b"a", MINUTE, 4),  # a's time reaches 0-60 s's end: it closes
        (b"b", MINUTE - 1, 3),  # b stays in its first minute: none of b's closes
        (b"a", 3 * MINUTE + 5, 8),
    ]:
        sums.add(key, at, value)
    assert sums.closed() == {
        (b"a", 0): (MINUTE, 3),
        (b"a", MINUTE): (2 * MINUTE, 4),
    }


def test_a_closing_record_per_key_at_the_end_closes_every_window_of_the_readings() -> None:
    sums = WindowSums()
    for key, at, value in [(b"a", 5, 1), (b"a", MINUTE + 5, 2), (b"b", 3 * MINUTE - 1, 7)]:
        sums.add(key, at, value)
    for key in (b"a", b"b"):  # as produce_readings closes 3 minutes of readings
        sums.add(key, 3 * MINUTE, 0)
    assert sums.closed() == {
        (b"a", 0): (MINUTE, 1),
        (b"a", MINUTE): (2 * MINUTE, 2),
        (b"b", 2 * MINUTE): (3 * MINUTE, 7),
    }


def test_check_names_missing_extra_differing_and_twice_emitted_windows() -> None:
    expected = {(b"a", 0): (MINUTE, 3), (b"a", MINUTE): (2 * MINUTE, 4), (b"b", 0): (MINUTE, 1)}
    assert check(expected, dict(expected), []) == ""
    found = {(b"a", 0): (MINUTE, 3), (b"a", MINUTE): (2 * MINUTE, 5), (b"c", 0): (MINUTE, 9)}
    problems = check(expected, found, ["(b'a', 0) emitted twice"])
    assert "emitted twice" in problems
    assert "1 windows missing, e.g. [(b'b', 0)]" in problems
    assert "1 windows not expected, e.g. [(b'c', 0)]" in problems
    assert "1 windows differ, e.g. (b'a', 60000): expected (end, sum) (120000, 4), got " in problems


def test_no_number_is_printed_when_a_run_gave_other_sums(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    @contextmanager
    def no_broker(_bootstrap: str | None, _prefix: str) -> Iterator[tuple[Path, str]]:
        yield Path("/nonexistent"), "127.0.0.1:1"

    timing = Timing(startup=1.0, steady=2.0, records=1000, stop=0.1, rss_kib=100_000)
    wrong = Run("splitstate", "exactly-once", timing, windows=4, problems="1 windows differ")
    monkeypatch.setattr(window_sum, "scratch_and_broker", no_broker)
    monkeypatch.setattr(window_sum, "run_all", lambda *_args, **_kwargs: ([wrong], 4))
    monkeypatch.setattr(sys, "argv", ["window_sum.py", "--no-quix", "--bootstrap", "x:1"])
    with pytest.raises(SystemExit) as stopped:
        window_sum.main()
    assert stopped.value.code == 1
    out = capsys.readouterr().out
    assert "splitstate exactly-once: results differ from the expected sums" in out
    assert "1 windows differ" in out
    assert "records/s" not in out
    assert "500" not in out  # the run's rate


@pytest.mark.integration
def test_a_tiny_splitstate_run_checks_its_sums_and_prints_the_table(kafka_bootstrap: str) -> None:
    command = [sys.executable, str(ROOT / "bench" / "window_sum.py"), "--no-quix"]
    command += ["--records", "20000", "--keys", "40", "--minutes", "10"]
    command += ["--bootstrap", kafka_bootstrap]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    expected = re.search(
        r"produced 20,000 records in [\d.]+s \(([\d,]+) windows close\)", done.stdout
    )
    assert expected is not None, done.stdout
    windows = expected.group(1)
    assert int(windows.replace(",", "")) > 300  # about 40 keys x 9 closed minutes
    for guarantee in ["exactly-once", "at-least-once"]:
        row = re.search(
            rf"splitstate, {guarantee}\s*│\s*([\d,]+)\s*│.*│\s*([\d,]+)\s*│", done.stdout
        )
        assert row is not None, done.stdout
        assert int(row.group(1).replace(",", "")) > 0  # records/s
        assert row.group(2) == windows
    assert f"Every run's output holds the {windows} expected window sums" in done.stdout


@pytest.mark.integration
def test_a_run_of_keys_quiet_at_the_end_emits_every_window_once(kafka_bootstrap: str) -> None:
    """2,000 keys of about one record a minute: many keys' last minute ends long before the
    input does, and the processors tick their partitions (a tick closes such windows, which
    Quix never closes; the at-least-once run reads the exactly-once run's ticks too). The
    closing records close every window; each run stops only once it has read all the input
    and emitted every window, though it counts the ticks it reads among its records."""
    command = [sys.executable, str(ROOT / "bench" / "window_sum.py"), "--no-quix"]
    command += ["--records", "20000", "--keys", "2000", "--minutes", "10"]
    command += ["--bootstrap", kafka_bootstrap]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    expected = re.search(r"\(([\d,]+) windows close\)", done.stdout)
    assert expected is not None, done.stdout
    windows = expected.group(1)
    assert int(windows.replace(",", "")) > 10_000  # every key-minute with a reading (~12,600)
    assert f"Every run's output holds the {windows} expected window sums" in done.stdout
