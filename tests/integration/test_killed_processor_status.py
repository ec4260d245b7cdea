"""A processor that is SIGKILLed cannot write its last "stopped" report; ``status`` must still
stop showing where it runs at once when it runs on this machine (its pid is gone), and say
that it is not running, instead of showing the dead pid for as long as its last report is
fresh."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from framework.coordination.progress_reports import read_reports
from framework.kafka import Clients
from framework.loader import load_app
from framework.ops.status import collect_status
from framework.ops.status_view import render_status
from tests.integration.harness import splitstate, unique, wait_for
from tests.integration.test_growth import LEASE, SEQUENCES
from tests.integration.test_many_hosts import ROOT, Host

pytestmark = pytest.mark.integration


def test_status_shows_a_killed_processor_as_gone_within_seconds(
    tmp_path: Path, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic, app_id = unique("events"), unique("killed")
    settings = {
        "app_id": app_id,
        "kafka": {"bootstrap_servers": kafka_bootstrap},
        "inputs": [{"topic": topic, "partitions": 1, **LEASE}],
        "outputs": [{"topic": unique("seq-out"), "partitions": 1}],
        "initial_processors": 1,
        "snapshots": {"enabled": False},
        "bootstrap": "replay",
    }
    host = Host(tmp_path, "host-0", settings)
    operator = Host(tmp_path, "operator", settings)  # status here: no state of its own
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.chdir(operator.directory)
    created = splitstate("topics", "create", SEQUENCES, "--config", str(operator.config))
    assert created.returncode == 0, created.stderr
    app = load_app(SEQUENCES, operator.config)
    kafka = Clients.of(app.config)
    try:
        host.start(0)
        assert host.process is not None
        pid = host.process.pid

        def reported() -> bool:
            report = read_reports(kafka, app.config.progress_topic).get(0)
            return report is not None and report.pid == pid and not report.stopped

        wait_for(reported, 60, "processor 0's first progress report")
        running = collect_status(app, kafka).processors[0]
        assert running.pid == pid and running.host is not None

        host.process.send_signal(signal.SIGKILL)
        host.process.wait(timeout=30)
        killed = time.monotonic()
        status = collect_status(app, kafka)
        seconds = time.monotonic() - killed
        gone = status.processors[0]
        assert (gone.pid, gone.host) == (None, None), (gone, host.output()[-2000:])
        assert seconds < 10
        assert running.silence is None
        assert gone.silence is not None and gone.silence.why == "exited"
        text = render_status(status)
        assert f"processor 0 is not running: its process ({gone.silence.host}, pid {pid})" in text
    finally:
        host.stop(timeout=30)
        kafka.close()
