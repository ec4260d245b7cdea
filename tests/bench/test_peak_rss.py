"""The benchmarks' peak RSS is the run process's own: a child started by a parent holding much
memory does not report the parent's (``ru_maxrss`` keeps the high-water mark across exec: the
runs of bench/throughput.py and bench/window_sum.py reported their parent's RSS)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HELD = 300 * 1024 * 1024


def test_a_run_started_by_a_big_parent_reports_its_own_peak_rss() -> None:
    held = bytearray(HELD)
    for i in range(0, HELD, 4096):  # touch every page: resident
        held[i] = 1
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import time; "
        "from bench.throughput_runs import Clock; "
        "print(Clock(time.time()).timing(0).rss_kib)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(ROOT)], capture_output=True, text=True, check=True
    )
    reported = int(done.stdout.strip())
    assert 0 < reported < HELD // 1024 // 2, f"the child reported {reported} KiB"
    del held
