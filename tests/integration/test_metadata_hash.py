"""The control log keeps the inputs' last KIP-1101 metadata hash, so a restart notices changes."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions

from framework.coordination.scaling import read_control
from framework.coordination.topic_watch import input_group_hash
from framework.kafka import Clients
from framework.loader import load_app
from tests.integration.harness import (
    Supervised,
    create_app,
    unique,
    wait_for,
)

pytestmark = pytest.mark.integration

APP = "examples.wordcount.app:app"


def test_control_log_keeps_the_inputs_metadata_hash(
    tmp_path: Path, kafka_bootstrap: str, kafka_admin: AdminClient
) -> None:
    words = unique("words")
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
        app_id=unique("hash"),
        inputs=[{"topic": words, "partitions": 2}],
        outputs=[{"topic": unique("counts"), "partitions": 2}],
        initial_processors=1,
    )
    app = load_app(APP, config)
    kafka = Clients.of(app.config)

    def logged() -> int | None:
        return read_control(app).metadata_hash

    def grow(partitions: int) -> int:
        kafka_admin.create_partitions([NewPartitions(words, partitions)])[words].result(30)
        wait_for(
            lambda: input_group_hash(kafka, [words])[1][words] == partitions,
            30,
            f"{words} to have {partitions} partitions",
        )
        return input_group_hash(kafka, [words])[0]

    first = input_group_hash(kafka, [words])[0]
    runner = Supervised(APP, config, tmp_path / "state", tmp_path / "run.log")
    try:
        wait_for(lambda: "processor 0 of" in runner.output(), 60, "the processor to start")
        wait_for(lambda: logged() == first, 30, f"hash {first} in the control log")
        second = grow(4)  # while it runs: the processor's topic watcher writes the new hash
        assert second != first
        wait_for(lambda: logged() == second, 30, f"the new hash {second} in the control log")
    finally:
        assert runner.stop() == 0, runner.output()[-3000:]
    assert "changed while the app was down" not in runner.output()

    third = grow(6)  # while the app is down
    runner = Supervised(APP, config, tmp_path / "state", tmp_path / "run2.log")
    try:
        wait_for(lambda: logged() == third, 60, f"hash {third} in the control log")
    finally:
        assert runner.stop() == 0, runner.output()[-3000:]
    assert (
        f"metadata of the input topics changed while the app was down (hash {second} in "
        f"the control log, {third} now)" in runner.output()
    )
