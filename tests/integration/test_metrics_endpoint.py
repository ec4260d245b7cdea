"""The metrics endpoint of real processors during a scale 1 -> 2 (real broker).

Processor 0 processes every record alone and stops; the app is scaled to 2 and processor 1
started alone: with the old owner down no RELEASE comes, so the joiner catches up to T1 and
waits, READY. Its endpoint shows the catch-up lag fall to 0, the handoff move from CATCHING_UP
to READY and ``/readyz`` answer 503 all along. Processor 0 is started again; it releases, the
joiner completes, and its ``/readyz`` answers 200 only once COMPLETE is in the control log.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from framework.coordination.scaling import read_control
from framework.loader import load_app
from framework.metrics.ports import PORT_VARIABLE
from rebalance import HandoffPhase
from tests.integration.harness import (
    Supervised,
    create_app,
    produce,
    splitstate,
    unique,
    wait_for,
)

pytestmark = pytest.mark.integration

APP = "tests.integration.apps.slow_counts:app"
PARTITIONS = 4
RECORDS = 3000

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def free_ports() -> int:
    """A port ``p`` such that ``p`` and ``p + 1`` are free now."""
    for _attempt in range(50):
        with socket.socket() as first:
            first.bind(("127.0.0.1", 0))
            port = int(first.getsockname()[1])
            if port >= 65535:
                continue
            with socket.socket() as second:
                try:
                    second.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
                return port
    raise AssertionError("no two free ports in a row")


def get(url: str) -> tuple[int, str]:
    """Status and body of a GET; ``(0, reason)`` when nothing answers (yet)."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - http only
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError as error:
        return 0, str(error)


def scrape(port: int) -> Samples:
    """The samples at ``/metrics`` (none when nothing answers yet)."""
    status, text = get(f"http://127.0.0.1:{port}/metrics")
    if status != 200:
        return {}
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def pick(found: Samples, name: str, **labels: str) -> dict[frozenset[tuple[str, str]], float]:
    """The samples ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return {key: v for (n, key), v in found.items() if n == name and wanted <= key}


class Processor:
    """``splitstate run APP --processor-id J`` in the background, its metrics port set by
    the environment (``SPLITSTATE_METRICS__PORT``), as the supervisor does."""

    def __init__(self, config: Path, processor: int, port: int, log: Path) -> None:
        self.port = port
        self.log = log
        self._file = log.open("ab")
        command = [sys.executable, "-m", "framework.ops.cli", "run", APP, "--config", str(config)]
        self.process = subprocess.Popen(
            [*command, "--processor-id", str(processor)],
            stdout=self._file,
            stderr=subprocess.STDOUT,
            env={**os.environ, PORT_VARIABLE: str(port)},
        )

    def stop(self) -> int:
        """SIGTERM and wait; returns the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=90)
        finally:
            self._file.close()


def test_a_joiners_endpoint_during_a_scale(tmp_path: Path, kafka_bootstrap: str) -> None:
    words = unique("words")
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
        app_id=unique("metrics"),
        inputs=[{"topic": words, "partitions": PARTITIONS}],
        outputs=[{"topic": unique("counts"), "partitions": PARTITIONS}],
        initial_processors=1,
        bootstrap="replay",
        scaling={"catchup_batch": 200, "ready_lag": 0},
    )
    produce(kafka_bootstrap, words, ((f"w{i % 97}".encode(), b"") for i in range(RECORDS)))
    base = free_ports()
    log = tmp_path / "processors.log"

    # processor 0 alone processes every record: its committed offsets reach the ends
    owner = Processor(config, 0, base, log)
    try:

        def all_committed() -> bool:
            found = scrape(base)
            committed = pick(found, "splitstate_committed_offset", topic=words)
            lag = pick(found, "splitstate_lag_records", topic=words)
            done = sum(committed.values()) == RECORDS and len(lag) == PARTITIONS
            return done and not any(lag.values())

        wait_for(all_committed, 120, "processor 0 to commit every record")
        assert get(f"http://127.0.0.1:{base}/readyz") == (200, "ready\n")
        assert get(f"http://127.0.0.1:{base}/healthz")[0] == 200
    finally:
        assert owner.stop() == 0, log.read_text()

    scaled = splitstate("scale", APP, "--config", str(config), "--processors", "2")
    assert scaled.returncode == 0, scaled.stderr

    # processor 1 joins alone: it catches up to T1 and waits for a RELEASE that cannot come
    joiner = Processor(config, 1, base + 1, log)
    back: Processor | None = None  # processor 0, once started again
    try:
        seen: list[tuple[float, str, int]] = []  # (catch-up lag, handoff phase, /readyz)

        def caught_up_and_waiting() -> bool:
            found = scrape(base + 1)
            lags = pick(found, "splitstate_catchup_lag_records", topic=words)
            phases = pick(found, "splitstate_handoff_phase", role="target", source="0")
            phase = next((dict(k)["phase"] for k, v in phases.items() if v == 1), "")
            if not lags or not phase:
                return False
            ready = get(f"http://127.0.0.1:{base + 1}/readyz")[0]
            seen.append((sum(lags.values()), phase, ready))
            return phase == HandoffPhase.READY.value and seen[-1][0] == 0

        wait_for(caught_up_and_waiting, 120, "processor 1 to catch up")
        assert any(lag > 0 for lag, _, _ in seen), seen  # seen catching up, then caught up
        assert {phase for _, phase, _ in seen} >= {"READY"}
        assert any(p in ("PLANNED", "CATCHING_UP") for lag, p, _ in seen if lag > 0), seen
        assert {ready for _, _, ready in seen} == {503}, seen
        found = scrape(base + 1)
        assert sum(pick(found, "splitstate_processor_phase", phase="catching_up").values()) == 1
        assert sum(pick(found, "splitstate_catchup_records_total").values()) > 0
        status, reason = get(f"http://127.0.0.1:{base + 1}/readyz")
        assert status == 503 and "catching up" in reason, reason
        assert get(f"http://127.0.0.1:{base + 1}/healthz")[0] == 200
        app = load_app(APP, config)
        scale = read_control(app).scaling
        assert scale is not None and scale.handoffs[(0, 1)].phase is HandoffPhase.READY

        # the old owner comes back and releases; /readyz turns 200 only after COMPLETE
        back = Processor(config, 0, base, log)
        answers: list[int] = []

        def ready() -> bool:
            answers.append(get(f"http://127.0.0.1:{base + 1}/readyz")[0])
            return answers[-1] == 200

        wait_for(ready, 120, "processor 1 to be ready")
        state = read_control(app)  # read after the 200: COMPLETE must be there already
        assert state.scale is not None
        assert state.scale.handoffs[(0, 1)].phase is HandoffPhase.COMPLETE
        assert set(answers[:-1]) <= {503}, answers
        found = scrape(base + 1)
        assert sum(pick(found, "splitstate_processor_phase", phase="running").values()) == 1
        assert not pick(found, "splitstate_catchup_lag_records")
        moved = pick(found, "splitstate_committed_offset", topic=words)
        assert {dict(k)["partition"] for k in moved} == {"1", "3"}
    finally:
        statuses = [joiner.stop(), back.stop() if back is not None else 0]
        assert statuses == [0, 0], log.read_text()[-5000:]
    assert "metrics on http://127.0.0.1:" in log.read_text()


def test_run_all_serves_processor_j_on_port_plus_j(
    tmp_path: Path, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under the supervisor each processor has its own endpoint: processor j on the base
    port + j, each serving only its own series, both ready once running."""
    words = unique("words")
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
        app_id=unique("metricsall"),
        inputs=[{"topic": words, "partitions": PARTITIONS}],
        outputs=[{"topic": unique("counts"), "partitions": PARTITIONS}],
        initial_processors=2,
    )
    produce(kafka_bootstrap, words, ((f"w{i}".encode(), b"") for i in range(200)))
    base = free_ports()
    monkeypatch.setenv(PORT_VARIABLE, str(base))  # the supervisor's; children get base + j
    runner = Supervised(APP, config, tmp_path / "state", tmp_path / "run.log")
    try:
        for j in (0, 1):

            def ready(port: int = base + j) -> bool:
                return get(f"http://127.0.0.1:{port}/readyz")[0] == 200

            wait_for(ready, 120, f"processor {j} to be ready on port {base + j}")

        def all_counted() -> bool:  # counters per batch; gauges within about a second
            found = [scrape(base + j) for j in (0, 1)]
            records = [pick(f, "splitstate_records_total", topic=words) for f in found]
            committed = [pick(f, "splitstate_committed_offset", topic=words) for f in found]
            counted = sum(sum(r.values()) for r in records)
            return counted == sum(sum(c.values()) for c in committed) == 200

        wait_for(all_counted, 120, "both processors to count and commit the 200 records")
        for j in (0, 1):
            found = scrape(base + j)
            committed = pick(found, "splitstate_committed_offset", topic=words)
            assert {dict(k)["processor"] for k in committed} == {str(j)}
            assert {dict(k)["partition"] for k in committed} == {str(j), str(j + 2)}
    finally:
        assert runner.stop() == 0, runner.output()[-5000:]
