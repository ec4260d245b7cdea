"""A processor that lost its state directory rebuilds it without output, and never lowers
the group's committed offset meanwhile: stopped (or killed) in the middle of the rebuild,
it still rebuilds the rest without output, so every record's output is written once."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from framework.loader import load_app
from framework.runtime import ProcessorRuntime
from statestore import processor_path
from tests.integration.harness import (
    TopicReader,
    produce,
    splitstate,
    unique,
    write_config,
)

pytestmark = pytest.mark.integration

APP = "examples.wordcount.app:app"
RECORDS = 6000


def committed(kafka: str, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": kafka, "group.id": group})
    try:
        [tp] = consumer.committed([TopicPartition(topic, 0)], timeout=30)
        return int(tp.offset)
    finally:
        consumer.close()


def test_rebuilding_lost_state_never_lowers_the_group_offset(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    words, counts = unique("words"), unique("counts")
    config = write_config(
        tmp_path,
        kafka_bootstrap,
        app_id=unique("lost-state"),
        inputs=[{"topic": words, "partitions": 1}],
        outputs=[{"topic": counts, "partitions": 1}],
        initial_processors=1,
        batch={"max_records": 200, "max_wait_ms": 50},
    )
    assert splitstate("topics", "create", APP, "--config", str(config)).returncode == 0
    produce(kafka_bootstrap, words, ((f"w{i % 50}".encode(), b"") for i in range(RECORDS)))
    app = load_app(APP, config)
    group = app.config.app_id
    ProcessorRuntime(app, 0).run(until=lambda stats: stats.records >= RECORDS)
    assert committed(kafka_bootstrap, group, words) == RECORDS

    shutil.rmtree(processor_path(app.config.app_state_dir, 0))  # the disk is lost
    partly = ProcessorRuntime(app, 0).run(until=lambda stats: stats.restored >= 1000)
    assert 1000 <= partly.restored < RECORDS and partly.records == 0
    assert committed(kafka_bootstrap, group, words) == RECORDS  # not lowered by the stop

    rest = ProcessorRuntime(app, 0).run(until=lambda stats: stats.restored + 1 >= RECORDS // 2)
    assert rest.records == 0 and rest.outputs == 0  # still rebuilding, silently
    reader = TopicReader(kafka_bootstrap, counts, 1)
    try:
        reader.poll(3.0)
        assert len(reader.records) == RECORDS  # every output once, none repeated
    finally:
        reader.close()
