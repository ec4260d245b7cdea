"""bench/time_path.py: what it measures is the window app's real work (every window its
records close is emitted, as a plain computation of the sums says), and it prints its table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

from bench import time_path
from bench.window_input import WindowSums
from bench.window_sum_runs import window_sum_app

ROOT = Path(__file__).resolve().parents[2]


def test_the_window_app_emits_every_window_its_records_close(tmp_path: Path) -> None:
    records = time_path.messages(3000, 40, 5)
    sums = WindowSums()
    for message in records:
        stamp = message.timestamp()[1]
        sums.add(message.key() or b"", stamp, orjson.loads(message.value() or b""))
    app = window_sum_app(time_path._config())
    measured = time_path.run(app, records, 500, tmp_path)
    assert measured.records == 3000
    assert measured.outputs == len(sums.closed()) > 40 * 3
    assert measured.process > 0 and measured.commit > 0


def test_it_prints_a_row_per_app() -> None:
    command = [sys.executable, str(ROOT / "bench" / "time_path.py"), "--records", "2000"]
    command += ["--keys", "20", "--repeat", "1", "--profile", "3"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "@app.window, Tumbling 1 min, Sum" in done.stdout
    assert "plain store, running sum (no time)" in done.stdout
    assert "Ordered by: internal time" in done.stdout  # the profile
