"""`splitstate scale` refuses what cannot be met, `status` shows a scale in progress, and the
supervisor applies a changed `processors` in the config file."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from framework.coordination.control_log import ControlLog
from framework.coordination.scaling import read_control
from framework.kafka import Clients
from framework.loader import load_app
from rebalance.control_records import abort_record
from tests.integration.harness import (
    Supervised,
    create_app,
    produce,
    splitstate,
    unique,
    wait_for,
    write_config,
)

pytestmark = pytest.mark.integration

APP = "examples.wordcount.app:app"


def test_scale_refusals_status_and_config_driven_scale(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    words = unique("words")
    config = write_config(
        tmp_path,
        kafka_bootstrap,
        app_id=unique("scalecmd"),
        inputs=[{"topic": words, "partitions": 8}],
        outputs=[{"topic": unique("counts"), "partitions": 8}],
        initial_processors=2,
        processors=2,
    )
    assert splitstate("topics", "create", APP, "--config", str(config)).returncode == 0
    before = splitstate("scale", APP, "--config", str(config), "--processors", "3")
    assert before.returncode == 2
    assert "has never run, so there is nothing to scale" in before.stderr

    runner = Supervised(APP, config, tmp_path / "state", tmp_path / "run.log")
    try:
        wait_for(lambda: "processor 1 of" in runner.output(), 60, "processors to start")
    finally:
        assert runner.stop() == 0

    def scale(processors: int) -> tuple[int, str]:
        result = splitstate("scale", APP, "--config", str(config), "--processors", str(processors))
        return result.returncode, result.stdout + result.stderr

    status, text = scale(9)
    assert status == 2 and "processors (9) cannot exceed the input partitions (8)" in text
    status, text = scale(1)
    assert status == 2 and "processors (1) cannot be below initial_processors (2)" in text
    status, text = scale(2)
    assert status == 2 and "already runs 2 processors" in text
    status, text = scale(3)
    assert status == 0, text
    assert f"generation 1: 2 -> 3 processors; moves: 0->2 ['{words}[2]', '{words}[6]']" in text
    status, text = scale(5)
    assert status == 2 and "a scale to 3 processors (generation 1) is in progress" in text

    shown = splitstate("status", APP, "--config", str(config))
    assert shown.returncode == 0, shown.stderr
    assert "scaling to 3 processors:" in shown.stdout
    assert f"0->2 PLANNED       {words}[2]" in shown.stdout
    assert "catch-up progress:" in shown.stdout
    assert "processor 2 <- 0 PLANNED" in shown.stdout

    # The supervisor finishes the scale, then applies processors: 4 from the edited config.
    runner = Supervised(APP, config, tmp_path / "state", tmp_path / "run2.log")
    app = load_app(APP, config)
    try:
        wait_for(lambda: (read_control(app).processors or 0) == 3, 120, "generation 1")
        config.write_text(config.read_text().replace("\nprocessors: 2\n", "\nprocessors: 4\n"))
        assert "\nprocessors: 4\n" in config.read_text()
        wait_for(lambda: (read_control(app).processors or 0) == 4, 120, "the config's 4")
    finally:
        assert runner.stop() == 0, runner.output()[-2000:]
    log = runner.output()
    assert "config asks for 4 processors: scaling 3 -> 4 (generation 2)" in log
    assert "processor 3 took over" in log
    final = splitstate("status", APP, "--config", str(config))
    assert "generation 2, 4 processors (initial 2)" in final.stdout


def test_a_scale_is_refused_when_retention_deleted_history_it_needs(
    tmp_path: Path, kafka_bootstrap: str, kafka_admin: AdminClient
) -> None:
    words = unique("words")
    config = write_config(
        tmp_path,
        kafka_bootstrap,
        app_id=unique("retention"),
        inputs=[{"topic": words, "partitions": 8}],
        outputs=[{"topic": unique("counts"), "partitions": 8}],
        initial_processors=2,
        bootstrap="replay",  # replay's limits; snapshots: test_snapshots
        snapshots={"enabled": False},
    )
    assert splitstate("topics", "create", APP, "--config", str(config)).returncode == 0
    produce(kafka_bootstrap, words, ((f"w{i}".encode(), b"") for i in range(2000)))
    runner = Supervised(APP, config, tmp_path / "state", tmp_path / "run.log")
    try:
        wait_for(lambda: "processor 1 of" in runner.output(), 60, "processors to start")
        time.sleep(2)
        # As if retention deleted the start of partition 2, which moves to processor 2.
        futures = kafka_admin.delete_records([TopicPartition(words, 2, 10)])
        for future in futures.values():
            future.result(timeout=30)
        # the scale is refused up front: its receiver could only stop later
        scaled = splitstate("scale", APP, "--config", str(config), "--processors", "3")
        assert scaled.returncode != 0
        assert f"{words}[2] starts at 10" in scaled.stderr, scaled.stderr
        assert "spark.archive" in scaled.stderr
        assert read_control(load_app(APP, config)).scaling is None
        # a scale whose history went missing after it was accepted stops the joiner's
        # catch-up instead: tests/integration/test_scale_abort.py
    finally:
        assert runner.stop() == 0
    assert "processor 0 released" not in runner.output()  # nothing moved


def test_status_lists_ignored_control_records_as_past_events_without_warning(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    """A refused request stays in the control log. `status` lists the last ones once, as
    past events, and no longer warns about each on stderr every time it replays the log."""
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
        app_id=unique("ignored"),
        inputs=[{"topic": unique("words"), "partitions": 2}],
        outputs=[{"topic": unique("counts"), "partitions": 2}],
        initial_processors=1,
    )
    app = load_app(APP, config)
    clients = Clients.of(app.config)
    try:
        log = ControlLog(clients, app.config.control_topic)
        log.append(*(abort_record(g, "x") for g in range(3, 8)))
    finally:
        clients.close()
    shown = splitstate("status", APP, "--config", str(config))
    assert shown.returncode == 0, shown.stderr
    assert "ignored" not in shown.stderr, shown.stderr
    assert "control log: 5 records ignored" in shown.stdout, shown.stdout
    listed = re.findall(r"an abort of generation (\d+)", shown.stdout)
    assert listed == ["5", "6", "7"], shown.stdout  # the last three
