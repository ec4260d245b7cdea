"""A new user's path: `splitstate new`, `topics create`, `python app.py --all`, records in,
`splitstate tail` shows the counts (issue 37: the first hour, against the real broker)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.harness import produce, splitstate, unique

pytestmark = pytest.mark.integration


def test_a_new_app_runs_and_its_outputs_can_be_tailed(tmp_path: Path, kafka_bootstrap: str) -> None:
    name = unique("shop")
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
            tailed = cli(
                "tail",
                "app.py:app",
                "--from-beginning",
                "--max-records",
                "3",
                "--idle-seconds",
                "90",
            )
        finally:
            process.send_signal(signal.SIGTERM)
            status = process.wait(timeout=90)
    output = (tmp_path / "run.log").read_text(errors="replace")
    assert status == 0, output[-3000:]
    assert tailed.returncode == 0, tailed.stderr
    lines = tailed.stdout.splitlines()
    assert len(lines) == 3, tailed.stdout
    assert sorted(line.split(": ", 1)[1] for line in lines) == [
        '{"key":"apple","count":1}',
        '{"key":"apple","count":2}',
        '{"key":"pear","count":1}',
    ], tailed.stdout
