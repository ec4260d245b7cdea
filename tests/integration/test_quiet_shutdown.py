"""Stopping prints nothing but our own words: no librdkafka lines, no late lease warnings.

The demo (`make demo`) once ended with librdkafka's ``%3|...|FAIL|...Connection refused``
lines and "could not refresh the topic registry" warnings printed after its last line: its
producer (and that producer's lease renewer), its reader and the topic registry's clients
outlived the broker. ``splitstate run --all`` stopped with SIGTERM must be as quiet.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.harness import Supervised, create_app, produce, unique, wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
#: what librdkafka prints itself (``%3|1700000000.123|FAIL|rdkafka#consumer-1| ...``), what
#: it says through Python logging, and a lease renewal failing once the broker is gone
NOISE = re.compile(r"^%\d\||rdkafka|FAIL\||could not refresh")
DEMO_LAST_LINE = "== broker stopped; everything the demo started is gone"


def noise(lines: list[str]) -> list[str]:
    """The lines of ``lines`` that are librdkafka's or a lease's late complaints."""
    return [line for line in lines if NOISE.search(line)]


def test_the_demo_prints_nothing_after_its_last_line() -> None:
    result = subprocess.run(
        [sys.executable, "examples/demo.py"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # one stream, in the order things were written
        text=True,
        timeout=540,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    lines = result.stdout.splitlines()
    assert result.returncode == 0, result.stdout[-3000:]
    assert DEMO_LAST_LINE in lines, result.stdout[-3000:]
    after = lines[lines.index(DEMO_LAST_LINE) + 1 :]
    assert [line for line in after if line.strip()] == [], "printed after the demo's last line"
    assert noise(lines) == [], "librdkafka or the lease spoke during the demo"


def test_run_all_stopped_with_sigterm_says_nothing_of_librdkafka(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    app = "examples.wordcount.app:app"
    topic = unique("words")
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        app,
        app_id=unique("quiet"),
        initial_processors=2,
        processors=2,
        inputs=[{"topic": topic, "partitions": 4}],
        outputs=[{"topic": unique("counts"), "partitions": 4}],
    )
    produce(kafka_bootstrap, topic, ((f"w{i % 7}".encode(), b"") for i in range(200)))
    supervised = Supervised(app, config, tmp_path / "state", tmp_path / "run.log")
    try:
        wait_for(lambda: supervised.output().count("partitions [") >= 2, 120, "both processors")
    finally:
        status = supervised.stop()
    lines = supervised.output().splitlines()
    assert status == 0, supervised.output()[-3000:]
    assert any("all processors stopped" in line for line in lines), supervised.output()[-3000:]
    assert noise(lines) == [], supervised.output()[-3000:]
