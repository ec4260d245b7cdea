"""A new user's path: `splitstate new`, `topics create`, `python app.py --all`, records in,
`splitstate tail` shows the counts, `splitstate scale` to a second processor while it runs, and
the counts go on exactly; then the windows tutorial's sensors example, run as the tutorial says
(issue 37: the first hour, against the real broker)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.harness import produce, splitstate, unique

pytestmark = pytest.mark.integration


def test_a_new_app_runs_scales_and_its_outputs_can_be_tailed(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    name = unique("shop").replace("-", "_")  # (an app name is a Python name)
    assert splitstate("new", name, "--directory", str(tmp_path)).returncode == 0
    directory = tmp_path / name
    environment = {
        **os.environ,
        "SPLITSTATE_KAFKA__BOOTSTRAP_SERVERS": kafka_bootstrap,
        "SPLITSTATE_STATE_DIR": str(tmp_path / "state"),
    }

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "framework.ops.cli", *args],
            cwd=directory,
            env=environment,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    tail = ("tail", "app.py:app", "--from-beginning", "--idle-seconds", "90", "--max-records")
    created = cli("topics", "create", "app.py:app")
    assert created.returncode == 0, created.stderr
    produce(kafka_bootstrap, f"{name}-input", [(b"apple", b""), (b"pear", b""), (b"apple", b"")])
    with (tmp_path / "run.log").open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "app.py", "--all"],
            cwd=directory,
            env=environment,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            tailed = cli(*tail, "3")
            scaled = cli("scale", "app.py:app", "--processors", "2")
            assert scaled.returncode == 0, scaled.stderr
            more = [b"apple", b"pear", b"fig", b"kiwi", b"apple"]
            produce(kafka_bootstrap, f"{name}-input", [(key, b"") for key in more])
            after = cli(*tail, "8")
            handed = False
            deadline = time.monotonic() + 120
            while not handed and time.monotonic() < deadline:
                status = cli("status", "app.py:app").stdout
                handed = re.search(rf"{name}-input\[1\] +1 ", status) is not None
        finally:
            process.send_signal(signal.SIGTERM)
            stopped = process.wait(timeout=90)
    output = (tmp_path / "run.log").read_text(errors="replace")
    assert stopped == 0, output[-3000:]
    assert tailed.returncode == 0, tailed.stderr
    lines = tailed.stdout.splitlines()
    assert len(lines) == 3, tailed.stdout
    assert sorted(line.split(": ", 1)[1] for line in lines) == [
        '{"key":"apple","count":1}',
        '{"key":"apple","count":2}',
        '{"key":"pear","count":1}',
    ], tailed.stdout
    # the second processor took over part of the keys, and each key's count went on: 1, 2, ...
    assert after.returncode == 0, after.stderr
    counted = sorted(line.split(": ", 1)[1] for line in after.stdout.splitlines())
    expected = [("apple", 4), ("fig", 1), ("kiwi", 1), ("pear", 2)]
    assert counted == sorted(
        f'{{"key":"{key}","count":{count}}}'
        for key, last in expected
        for count in range(1, last + 1)
    ), after.stdout
    assert handed, f"processor 1 never took over input partition 1 (one of 0's):\n{status}"


def test_the_windows_tutorials_sensors_close_their_minutes_and_judge_late_readings(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    """docs/tutorial/windows.md's commands on examples/sensors, its readings as in its test."""
    app = "examples.sensors.app:app"
    readings = "readings"  # (the app's function is registered for it; no other test uses it)
    environment = {
        **os.environ,
        "SPLITSTATE_KAFKA__BOOTSTRAP_SERVERS": kafka_bootstrap,
        "SPLITSTATE_APP_ID": unique("sensors"),
        "SPLITSTATE_STATE_DIR": str(tmp_path / "state"),
    }

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "framework.ops.cli", *args],
            env=environment,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )

    created = cli("topics", "create", app)
    assert created.returncode == 0, created.stderr
    sent = [(20.0, 1_000), (22.0, 59_000), (30.0, 75_000), (99.0, 30_000)]  # the last: late
    produce(
        kafka_bootstrap,
        readings,
        [(b"s1", json.dumps({"celsius": c, "at": at}).encode()) for c, at in sent],
    )
    tail = ("--from-beginning", "--idle-seconds", "120", "--max-records", "1")
    with (tmp_path / "run.log").open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "framework.ops.cli", "run", app, "--all"],
            env=environment,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            closed = cli("tail", app, *tail)
            late = cli("tail", app, "--dead-letters", *tail)
        finally:
            process.send_signal(signal.SIGTERM)
            stopped = process.wait(timeout=90)
    assert stopped == 0, (tmp_path / "run.log").read_text(errors="replace")[-3000:]
    assert closed.returncode == 0, closed.stderr
    assert closed.stdout.endswith("""key 's1': {"start":0,"end":60000,"value":21.0}\n"""), (
        closed.stdout
    )
    assert late.returncode == 0, late.stderr
    assert f"dead letter, stage late, of {readings}[" in late.stdout, late.stdout
