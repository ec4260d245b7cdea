"""Processors on separate "hosts": each its own working directory, state directory and
process, its id from ``SPLITSTATE_PROCESSOR_ID``, no supervisor, and snapshots in an S3 store
reached by URL. Through a scale out, a growth and a scale in, every (key, producer) sequence
arrives exactly once and in order; ``status`` on a host with no state of its own shows every
processor's host, pid, state size, and a receiver's T2, from their progress reports."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from framework.coordination.progress_reports import read_reports
from framework.coordination.scaling import read_control
from framework.kafka import Clients
from framework.loader import load_app
from framework.ops.processor_facts import ProcessorFacts
from framework.ops.status import collect_status
from tests.integration.harness import TopicReader, splitstate, unique, wait_for
from tests.integration.test_growth import (
    LEASE,
    SEQUENCES,
    SequenceProducer,
    check_sequences,
    read_all,
    stop_producing,
)
from tests.integration.test_growth_scaling import expand, wait_for_generation
from tests.s3_server import CREDENTIALS, s3_server, snapshot_url

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


class Host:
    """One machine: a working directory with the app's config, running one processor."""

    def __init__(self, root: Path, name: str, settings: dict[str, Any]) -> None:
        self.directory = root / name
        self.directory.mkdir()
        # no state_dir: the default, .splitstate/state/<app_id>, inside this host's directory
        self.config = self.directory / "app.yaml"
        self.config.write_text(yaml.safe_dump(settings))
        self.process: subprocess.Popen[bytes] | None = None
        self.log = self.directory / "run.log"

    def state(self, app_id: str) -> Path:
        """This host's state directory."""
        return self.directory / ".splitstate" / "state" / app_id

    def start(self, processor: int) -> None:
        """``splitstate run`` with the id from the environment only."""
        env = {
            **os.environ,
            **CREDENTIALS,
            "SPLITSTATE_PROCESSOR_ID": str(processor),
            "PYTHONPATH": str(ROOT),
            "SPLITSTATE_DEBUG": "1",  # a processor that fails shows its traceback
        }
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "framework.ops.cli",
                    "run",
                    SEQUENCES,
                    "--config",
                    "app.yaml",
                ],
                cwd=self.directory,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def stop(self, timeout: float = 90) -> int | None:
        """SIGTERM and wait (``None`` when it never ran)."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout)

    def output(self) -> str:
        """What this host's processor logged."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def test_processors_on_separate_hosts_scale_and_grow(
    tmp_path: Path, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic, out = unique("events"), unique("seq-out")
    app_id = unique("hosts")
    with s3_server() as endpoint:
        settings = {
            "app_id": app_id,
            "kafka": {"bootstrap_servers": kafka_bootstrap},
            "inputs": [{"topic": topic, "partitions": 4, **LEASE}],
            "outputs": [{"topic": out, "partitions": 4}],
            "initial_processors": 2,
            "batch": {"max_records": 500, "max_wait_ms": 50},
            "scaling": {"ready_lag": 200},
            "snapshots": {"url": snapshot_url(endpoint), "interval_seconds": 30},
        }
        hosts = [Host(tmp_path, f"host-{j}", settings) for j in range(3)]
        operator = Host(tmp_path, "operator", settings)  # runs commands; holds no state
        for name, value in CREDENTIALS.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("PYTHONPATH", str(ROOT))
        monkeypatch.chdir(operator.directory)  # commands and status run on the operator's host
        created = splitstate("topics", "create", SEQUENCES, "--config", str(operator.config))
        assert created.returncode == 0, created.stderr
        app = load_app(SEQUENCES, operator.config)
        kafka = Clients.of(app.config)
        producers = [SequenceProducer(kafka_bootstrap, topic, name) for name in ("a", "b")]
        reader = TopicReader(kafka_bootstrap, out, 4)
        try:
            hosts[0].start(0)
            hosts[1].start(1)
            for producer in producers:
                producer.start()
            reader.wait_for(lambda r: len(r.records) > 2000, timeout=120, what="outputs")

            scaled = splitstate(
                "scale", SEQUENCES, "--config", str(operator.config), "--processors", "3"
            )
            assert scaled.returncode == 0, scaled.stderr
            hosts[2].start(2)
            wait_for_generation(operator.config, 1)
            scale = read_control(app).scale
            assert scale is not None and scale.generation == 1
            released = {
                position: offset
                for handoff in scale.handoffs.values()
                for position, offset in handoff.released.items()
            }
            assert released, "the scale moved no partition"

            def receiver_seen() -> bool:
                reports = read_reports(kafka, app.config.progress_topic)
                seen = ProcessorFacts(app, reports, time.time())  # on the operator's host
                return seen.catch_up(2, 1) == released

            # the receiver's T2 reached each F, as status on another host reads it
            wait_for(receiver_seen, 30, "processor 2's T2 = F, seen from the operator's host")

            expand(operator.config, topic, 6)
            reader.wait_for(lambda r: len(r.records) > 8000, timeout=120, what="more outputs")
            status = collect_status(app)  # from the operator's directory: no state here
            assert not operator.state(app_id).exists()
            for processor in status.processors:
                host = hosts[processor.processor]
                assert host.process is not None
                assert processor.pid == host.process.pid, processor
                assert processor.host == socket.gethostname(), processor
                assert processor.state_bytes, processor  # reported: not on this host
            assert status.topic_counts[topic] == [4, 6]

            scaled = splitstate(
                "scale", SEQUENCES, "--config", str(operator.config), "--processors", "2"
            )
            assert scaled.returncode == 0, scaled.stderr
            wait_for_generation(operator.config, 2)
            assert hosts[2].process is not None
            assert hosts[2].process.wait(timeout=60) == 0  # it gave its keys back and left
            stop_producing(producers, reader)
        finally:
            codes = [host.stop() for host in hosts]
            reader.close()
            kafka.close()
        for host in hosts:
            assert host.state(app_id).is_dir()  # each host kept its own state
        assert codes[:2] == [0, 0], [h.output()[-3000:] for h in hosts]
        check_sequences(reader, producers)
        assert read_all(kafka_bootstrap, f"{app_id}-dead-letters", 1) == []
        assert "id from SPLITSTATE_PROCESSOR_ID" in hosts[2].output()
