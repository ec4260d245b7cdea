"""Input retention: `topics create` sets it, `status` warns when history is gone, and a processor
never silently skips records that retention deleted before it read them."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from framework.kafka import Clients
from framework.processing import ProcessorStoppedError
from framework.runtime.retention import check_retained
from tests.integration.harness import (
    Supervised,
    TopicReader,
    create_app,
    produce,
    splitstate,
    unique,
)

pytestmark = pytest.mark.integration

APP = "examples.wordcount.app:app"
WARNING = (
    "scaling out/in by replay is no longer possible for these partitions; use bootstrap: spark "
    "with an archive"
)


def retention(admin: AdminClient, topic: str) -> tuple[str, bool]:
    """A topic's retention.ms and whether it is the broker's default."""
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(30)
    entry = entries["retention.ms"]
    return str(entry.value), bool(entry.is_default)


def watermarks(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, int]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("marks")})
    try:
        return [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            for p in range(partitions)
        ]
    finally:
        consumer.close()


def delete_before(admin: AdminClient, topic: str, partition: int, offset: int) -> None:
    """Delete the records of ``topic[partition]`` before ``offset``, as retention would."""
    futures = admin.delete_records([TopicPartition(topic, partition, offset)])
    for future in futures.values():
        future.result(timeout=30)


def test_topics_create_sets_retention_and_status_warns_of_deleted_history(
    tmp_path: Path, kafka_bootstrap: str, kafka_admin: AdminClient
) -> None:
    words, clicks, counts = unique("words"), unique("clicks"), unique("counts")
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
        app_id=unique("keep"),
        inputs=[
            {"topic": words, "partitions": 2},
            {"topic": clicks, "partitions": 2, "retention_ms": 86_400_000},
        ],
        outputs=[{"topic": counts, "partitions": 2}],
        initial_processors=1,
        bootstrap="replay",  # the warning is about replay; snapshots: test_snapshots
    )
    assert retention(kafka_admin, words) == ("-1", False)  # inputs keep their whole history
    assert retention(kafka_admin, clicks) == ("86400000", False)  # as configured
    assert retention(kafka_admin, counts)[1]  # outputs keep the broker's default

    produce(kafka_bootstrap, words, ((f"w{i}".encode(), b"") for i in range(400)))
    before = splitstate("status", APP, "--config", str(config))
    assert before.returncode == 0, before.stderr
    assert WARNING not in before.stdout

    ((_low, high),) = watermarks(kafka_bootstrap, words, 2)[1:]
    assert high > 20
    delete_before(kafka_admin, words, 1, 20)
    after = splitstate("status", APP, "--config", str(config))
    assert after.returncode == 0, after.stderr
    warning = [line for line in after.stdout.splitlines() if WARNING in line]
    assert len(warning) == 1, after.stdout
    assert f"{words}[1] starts at offset 20" in warning[0]
    assert f"{words}[0]" not in warning[0] and clicks not in warning[0]

    # A brand-new app starts a partition whose start was deleted at its earliest record, as
    # auto.offset.reset=earliest does, and says so.
    runner = Supervised(APP, config, tmp_path / "state", tmp_path / "run.log")
    reader = TopicReader(kafka_bootstrap, counts, 2)
    try:
        reader.wait_for(lambda r: len(r.records) >= 380, 90, "380 outputs")
        reader.poll(1.0)
    finally:
        status = runner.stop()
        reader.close()
    assert status == 0, runner.output()[-3000:]
    assert len(reader.records) == 380
    assert (
        f"{words}[1] starts at offset 20, the earliest Kafka still holds: records before it "
        "were deleted before the app first read the partition" in runner.output()
    )


def test_processor_stops_when_retention_deleted_records_it_still_needs(
    tmp_path: Path, kafka_bootstrap: str, kafka_admin: AdminClient
) -> None:
    words, counts = unique("words"), unique("counts")
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
        app_id=unique("lost"),
        inputs=[{"topic": words, "partitions": 4}],
        outputs=[{"topic": counts, "partitions": 4}],
        initial_processors=2,
        bootstrap="replay",  # replay's limits; snapshots: test_snapshots
        snapshots={"enabled": False},
    )
    produce(kafka_bootstrap, words, ((f"w{i}".encode(), b"") for i in range(2000)))
    runner = Supervised(APP, config, tmp_path / "state", tmp_path / "run.log")
    reader = TopicReader(kafka_bootstrap, counts, 4)
    try:
        reader.wait_for(lambda r: len(r.records) >= 2000, 90, "2000 outputs")
        time.sleep(1.0)
    finally:
        assert runner.stop() == 0, runner.output()[-3000:]
        reader.close()
    processed = watermarks(kafka_bootstrap, words, 4)
    produce(kafka_bootstrap, words, ((f"v{i}".encode(), b"") for i in range(2000)))
    # Partition 1 (processor 1): retention deleted records its state has not processed yet.
    behind = processed[1][1] + 10
    delete_before(kafka_admin, words, 1, behind)
    # Partition 0 (processor 0): its state directory is lost, and the history it must be
    # rebuilt from (offset 0 up to the group's committed offset) is no longer complete.
    shutil.rmtree(tmp_path / "state" / "processor-0")
    delete_before(kafka_admin, words, 0, 10)

    runner = Supervised(APP, config, tmp_path / "state", tmp_path / "run2.log")
    try:
        runner.process.wait(timeout=90)  # both processors stop; nothing is left to supervise
    finally:
        runner.stop()
    log = runner.output()
    assert "processor 0 stopped on purpose" in log and "processor 1 stopped on purpose" in log
    assert "exited with status" not in log  # not restarted
    assert (
        f"{words}[1] resumes at offset {processed[1][1]} but Kafka holds it only from offset "
        f"{behind}" in log
    )
    assert f"{words}[0] must be rebuilt from offset 0 (no local state)" in log
    assert "retention deleted records the processor has not read" in log
    assert "splitstate backfill" in log


def test_a_grown_partition_never_read_must_still_start_at_zero(
    kafka_bootstrap: str, kafka_admin: AdminClient, topic_factory: Any
) -> None:
    """A partition an expand created holds records the app has not read yet; if retention
    deleted some before it was first read, starting at the earliest would lose them."""
    topic = topic_factory(partitions=2)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(20):
        producer.produce(topic, key=f"k{i}".encode(), value=b"v", partition=1)
    assert producer.flush(30) == 0
    for future in kafka_admin.delete_records([TopicPartition(topic, 1, 5)]).values():
        future.result(timeout=30)
    consumer = Clients({"bootstrap.servers": kafka_bootstrap}).consumer(unique("ret"))
    try:
        check_retained(0, consumer, {(topic, 1): (None, None)})  # an initial partition: fine
        with pytest.raises(ProcessorStoppedError, match="created by a growth"):
            check_retained(0, consumer, {(topic, 1): (None, None)}, grown={(topic, 1)})
    finally:
        consumer.close()
