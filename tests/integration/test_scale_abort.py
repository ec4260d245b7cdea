"""A scale that cannot finish is shown and can be abandoned: retention deleted the first
records of the partitions a joiner needs, so it stops; `status` says why and how to fix it;
`splitstate scale --abort` ends the scale, the old owners keep their partitions and the
outputs stay exact (every word's counts 1..n, none repeated)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from framework.app import App
from framework.coordination.scaling import read_control
from framework.loader import load_app
from framework.ops.status import collect_status
from framework.ops.status_view import render_status
from tests.integration.harness import counts_by_word, splitstate
from tests.integration.test_scaling import APP, ScalingRun, scale_to

pytestmark = pytest.mark.integration


def _stopped(app: App, processor: int) -> bool:
    return processor in [s.processor for s in collect_status(app).stopped]


@contextmanager
def paused(process: subprocess.Popen[bytes]) -> Iterator[None]:
    """``process`` (a child of this one) stopped by SIGSTOP while the block runs, continued
    after; its own children run on."""
    process.send_signal(signal.SIGSTOP)
    try:
        _pid, status = os.waitpid(process.pid, os.WUNTRACED)  # returns once it is stopped
        assert os.WIFSTOPPED(status), f"pid {process.pid} ended (wait status {status})"
        yield
    finally:
        process.send_signal(signal.SIGCONT)


def delete_processed_prefix(kafka: str, group: str, topic: str, partitions: list[int]) -> None:
    """Delete records the app already processed (as retention would)."""
    consumer = Consumer({"bootstrap.servers": kafka, "group.id": group})
    committed = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=30)
    consumer.close()
    assert all(tp.offset > 0 for tp in committed), committed
    admin = AdminClient({"bootstrap.servers": kafka})
    for future in admin.delete_records(
        [TopicPartition(topic, tp.partition, tp.offset // 2) for tp in committed]
    ).values():
        future.result(timeout=30)


def test_a_stopped_joiner_is_shown_and_the_scale_can_be_aborted(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    run = ScalingRun(
        tmp_path, kafka_bootstrap, bootstrap="replay", snapshots={"enabled": False}
    )  # replay's limits; snapshots: test_snapshots
    app = load_app(APP, run.config)
    config = app.config
    try:
        run.start_flowing()
        time.sleep(1)
        # 2 -> 3 moves partitions 2 and 6 to processor 2, which must replay them from 0;
        # retention deletes their first records after the scale was accepted and before
        # processor 2 starts: the supervisor (`run --all`), which starts it once it sees the
        # scale, is stopped meanwhile (processors 0 and 1, its children, run on)
        with paused(run.runner.process):
            generation = scale_to(run.config, 3)
            topic = config.inputs[0].topic
            delete_processed_prefix(kafka_bootstrap, config.app_id, topic, [2, 6])
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not _stopped(app, 2):
            time.sleep(0.5)
        status = collect_status(app)
        assert 2 in [s.processor for s in status.stopped], render_status(status)
        report = render_status(status)
        assert "processor 2 STOPPED" in report and "retention" in report, report
        assert "--abort" in report, report
        assert "as a whole" in report and "--resume" in report, report
        # the cause (deleted history) is not fixed and processor 2 was not restarted
        refused = splitstate("scale", APP, "--config", str(run.config), "--resume")
        assert refused.returncode != 0 and "has not been restarted since" in refused.stderr

        aborted = splitstate(
            "scale", APP, "--config", str(run.config), "--abort", "--reason", "input retention"
        )
        assert aborted.returncode == 0, aborted.stderr
        assert "aborted" in aborted.stdout
        state = read_control(app)
        assert state.scaling is None and state.processors == 2
        assert state.scale is not None and state.scale.generation == generation
        assert state.scale.aborted == "input retention"
        assert "was aborted: input retention" in render_status(collect_status(app))
        again = splitstate("scale", APP, "--config", str(run.config), "--abort")
        assert again.returncode != 0 and "nothing to abort" in again.stderr
        time.sleep(2)
        truth = run.finish()
    finally:
        exit_status, log = run.stop()
    assert exit_status == 0, log[-3000:]
    assert "cannot rebuild the keys it gains" in log
    seen = counts_by_word(run.reader.records)
    for word, n in truth.items():
        assert sorted(seen[word]) == list(range(1, n + 1)), (word, n, seen[word][:5])
    assert sum(len(v) for v in seen.values()) == sum(truth.values())
