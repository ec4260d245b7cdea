"""`splitstate --log-format json run APP --all`: every line the supervisor and its processors
write is one JSON object naming the app, the processor and the generation in force, and the
generation moves on when a scale completes."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from framework.coordination.scaling import read_control
from framework.loader import load_app
from tests.integration.harness import create_app, produce, splitstate, unique, wait_for

pytestmark = pytest.mark.integration

APP = "examples.wordcount.app:app"
FIELDS = {"time", "level", "logger", "message", "app", "processor", "generation"}


def _lines(log: Path) -> list[dict[str, Any]]:
    """Every line of ``log`` parsed (a line that is not JSON fails the test, named)."""
    parsed = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            parsed.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            pytest.fail(f"not a JSON line: {line!r}")
    return parsed


def test_run_all_logs_json_lines_with_app_processor_and_generation(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    app_id, words = unique("jsonlogs"), unique("words")
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
        app_id=app_id,
        initial_processors=1,
        processors=1,
        inputs=[{"topic": words, "partitions": 2}],
        outputs=[{"topic": unique("counts"), "partitions": 2}],
    )
    produce(kafka_bootstrap, words, ((f"w{i % 5}".encode(), b"") for i in range(300)))
    log = tmp_path / "run.log"
    command = [sys.executable, "-m", "framework.ops.cli", "--log-format", "json", "run", APP]
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*command, "--all", "--config", str(config)], stdout=out, stderr=subprocess.STDOUT
        )
    try:
        wait_for(lambda: "processor 0 of" in log.read_text(), 120, "processor 0 to start")
        scaled = splitstate("scale", APP, "--config", str(config), "--processors", "2")
        assert scaled.returncode == 0, scaled.stderr
        app = load_app(APP, config)
        wait_for(lambda: read_control(app).processors == 2, 120, "the scale to complete")
        # the processors' lines name generation 1 once they read the record that made it
        wait_for(
            lambda: {x["processor"] for x in _lines(log) if x["generation"] == 1} >= {0, 1},
            120,
            "both processors to log under generation 1",
        )
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=90) == 0
    lines = _lines(log)
    assert lines and all(set(line) >= FIELDS for line in lines)
    assert {line["app"] for line in lines} == {app_id}
    assert {line["processor"] for line in lines} == {None, 0, 1}  # None: the supervisor
    zero = [line["generation"] for line in lines if line["processor"] == 0]
    assert 0 in zero and zero[-1] == 1  # it ran under generation 0, and ended under 1
    assert any("took over" in line["message"] for line in lines if line["processor"] == 1)
