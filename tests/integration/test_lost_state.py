"""A processor that lost its state directory rebuilds it without output, and never lowers
the group's committed offset meanwhile: stopped (or killed) in the middle of the rebuild,
it still rebuilds the rest without output, so every record's output is written once."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from framework.loader import load_app
from framework.processing import ProcessorStoppedError
from framework.runtime.loop import ProcessorRuntime
from rebalance import bucket, key_hash
from statestore import ProcessorDatabase, processor_path
from tests.integration.harness import (
    Supervised,
    TopicReader,
    create_app,
    produce,
    splitstate,
    unique,
)
from tests.integration.test_scaling import scale_to, wait_for_generation

pytestmark = pytest.mark.integration

APP = "examples.wordcount.app:app"
RECORDS = 6000
LEASE = {"producer_lease_ms": 4000, "producer_delivery_timeout_ms": 3000}


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
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
        app_id=unique("lost-state"),
        inputs=[{"topic": words, "partitions": 1}],
        outputs=[{"topic": counts, "partitions": 1}],
        initial_processors=1,
        batch={"max_records": 200, "max_wait_ms": 50},
    )
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


def test_a_lost_state_after_a_growth_is_rebuilt_only_where_it_can_be(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    """B=1, the input grown 1 -> 2, processors 1 -> 2: partition 0 still holds the early
    records of keys now in partition 1 (processor 1's). Processor 0, rebuilding lost state
    from partition 0, must skip them; processor 1 cannot rebuild from partition 1 alone and
    stops with the fix."""
    words, counts = unique("words"), unique("counts")
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
        app_id=unique("lost-grown"),
        inputs=[{"topic": words, "partitions": 1, **LEASE}],
        outputs=[{"topic": counts, "partitions": 2}],
        initial_processors=1,
        processors=1,
        scaling={"ready_lag": 0},
        bootstrap="replay",  # replay's limits; snapshots: test_snapshots
        snapshots={"enabled": False},
    )
    keys = [f"w{i}".encode() for i in range(60)]
    produce(kafka_bootstrap, words, ((k, b"") for k in keys * 20))
    runner = Supervised(APP, config, tmp_path / "state", tmp_path / "run.log")
    try:
        grown = splitstate(
            "expand", APP, "--config", str(config), "--topic", words, "--partitions", "2",
            timeout=180,
        )  # fmt: skip
        assert grown.returncode == 0, grown.stderr
        produce(kafka_bootstrap, words, ((k, b"") for k in keys * 10))
        wait_for_generation(config, scale_to(config, 2))
        reader = TopicReader(kafka_bootstrap, counts, 2)
        reader.wait_for(lambda r: len(r.records) >= 30 * len(keys), 120, "every output")
        reader.close()
    finally:
        assert runner.stop() == 0, runner.output()[-3000:]
    app = load_app(APP, config)
    state_dir = app.config.app_state_dir
    mine = {k for k in keys if bucket(key_hash(k), 1, 2) == 0}

    shutil.rmtree(processor_path(state_dir, 0))
    in_partition_0 = 20 * len(keys) + 10 * len(mine)  # all early records, then mine only
    rebuilt = ProcessorRuntime(app, 0).run(until=lambda s: s.restored >= in_partition_0)
    assert rebuilt.records == 0
    database = ProcessorDatabase.open_read_only(processor_path(state_dir, 0))
    held = dict(database.items("counts"))
    database.close()
    assert held == dict.fromkeys(mine, 30)  # no key of processor 1's, every count exact

    shutil.rmtree(processor_path(state_dir, 1))
    with pytest.raises(ProcessorStoppedError, match="split off by a growth"):
        ProcessorRuntime(app, 1).run(until=lambda stats: stats.batches > 10)
