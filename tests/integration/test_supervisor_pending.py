"""The supervisor keeps a `processors` change that arrives during a scale and applies it after."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from framework.coordination.scaling import read_control
from framework.loader import load_app
from tests.integration.harness import counts_by_word, wait_for
from tests.integration.test_scaling import APP, ScalingRun, wait_for_generation

pytestmark = pytest.mark.integration


def set_processors(config: Path, processors: int, supervisor: int) -> None:
    """Edit `processors` in the config file and tell the supervisor at once (SIGHUP)."""
    text = re.sub(r"\nprocessors: \d+\n", f"\nprocessors: {processors}\n", config.read_text())
    config.write_text(text)
    os.kill(supervisor, signal.SIGHUP)


def test_processors_changed_during_a_scale_is_applied_after_it(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    run = ScalingRun(tmp_path, kafka_bootstrap)
    config, runner = run.config, run.runner
    app = load_app(APP, config)
    supervisor = runner.process.pid
    joiner: int | None = None
    try:
        run.start_flowing()
        set_processors(config, 3, supervisor)
        wait_for(lambda: 2 in runner.pids(), 60, "the joining processor 2")
        joiner = runner.pids()[2]
        os.kill(joiner, signal.SIGSTOP)  # the scale to 3 cannot complete while it is frozen
        scaling = read_control(app).scaling
        assert scaling is not None and scaling.new_processors == 3
        set_processors(config, 4, supervisor)
        wait_for(
            lambda: "a scale to 3 processors (generation 1) is in progress" in runner.output(),
            30,
            "the supervisor to see the change to 4 refused",
        )
        time.sleep(3)  # a few more config checks while the scale is still in progress
        os.kill(joiner, signal.SIGCONT)
        joiner = None
        wait_for_generation(config, 1)
        wait_for_generation(config, 2, timeout=120)
        assert read_control(app).processors == 4
        truth = run.finish()
    finally:
        if joiner is not None:
            os.kill(joiner, signal.SIGCONT)
        status, log = run.stop()
    assert status == 0, log[-3000:]
    assert "processors: 4 is pending: a scale to 3 processors (generation 1)" in log
    assert log.count("processors: 4 is pending") == 1  # logged once, retried quietly
    assert "config asks for 4 processors: scaling 3 -> 4 (generation 2)" in log
    seen = counts_by_word(run.reader.records)
    for word, n in truth.items():
        assert sorted(seen[word]) == list(range(1, n + 1)), (word, n, seen[word][:5])
