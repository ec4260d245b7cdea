"""`backfill` of an app that keeps time, from Kafka and from a Parquet archive, on the broker.

The input (``timed_app.make_history``: windows, a session, timers and a ttl store over
records out of order and late, ticks written into the partitions at known places, a growth
2 -> 4 in the middle whose markers sit in the parents and whose history the topic registry
records) is written into a real topic. `backfill` builds both processors' state with Spark;
every key's stores (``splitstate.time`` and ``splitstate.due`` with them) must be the bytes a
live run over the same records leaves, and a processor that opens the built state and goes on
with more records and ticks emits what the live processor emits for them: each window's
final once.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from framework import AppConfig
from framework.bootstrap.backfill import backfill
from framework.coordination.registry import TopicRegistry
from framework.kafka import Clients
from rebalance import bucket
from statestore import DatabaseIdentity, ProcessorDatabase
from tests.framework.test_spark_fold import records_table
from tests.framework.timed_app import (
    B,
    History,
    Written,
    extended,
    live_run,
    make_history,
    new_processor,
    state_items,
    timed_app,
    timed_config,
)
from tests.integration.harness import unique

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def _backfill_child(config_json: str, archive: str | None, out: Any) -> None:
    app = timed_app(AppConfig.model_validate_json(config_json))
    manifest = backfill(app, archive=None if archive is None else Path(archive)).manifest
    out.put((manifest.records_read, manifest.records_dead_lettered))


def backfill_in_own_jvm(config: AppConfig, archive: Path | None = None) -> tuple[int, int]:
    """``backfill`` in a child process (Spark's Kafka source needs its jars on the driver's
    classpath, which only a JVM started with them has): records read and dead-lettered."""
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    where = None if archive is None else str(archive)
    child = context.Process(target=_backfill_child, args=(config.model_dump_json(), where, out))
    child.start()
    child.join(600)
    assert child.exitcode == 0, child.exitcode
    read, dead = out.get(timeout=10)
    return int(read), int(dead)


def write_topic(bootstrap: str, topic: str, written: list[Written]) -> None:
    """Write ``written`` into ``topic``, each record where and at the offset it says."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    failures: list[str] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append(str(error))

    for partition, _offset, key, value, stamp, headers in written:
        producer.produce(
            topic,
            key=key,
            value=value,
            partition=partition,
            timestamp=stamp,
            headers=list(headers),
            on_delivery=delivered,
        )
        producer.poll(0)
    assert producer.flush(30) == 0
    assert not failures, failures[:3]


@pytest.fixture(scope="module")
def topic(kafka_bootstrap: str) -> Iterator[History]:
    """A topic of 4 partitions holding the history (offsets as ``History`` says), recorded in
    the topic registry as grown 2 -> 4 at its markers."""
    name = unique("timed-in")
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    kept = {"retention.ms": "-1"}  # its event times are of 2023: kept all the same
    created = admin.create_topics([NewTopic(name, 4, config=kept), NewTopic(f"{name}-out", 1)])
    for future in created.values():
        future.result(30)
    log = make_history(seed=41, keys=32, topic=name)
    write_topic(kafka_bootstrap, name, log.written)
    kafka = Clients({"bootstrap.servers": kafka_bootstrap})
    try:
        registry = TopicRegistry(kafka)
        kafka.create_topics([registry.topic_spec()])
        registry.write(log.entries[name])
    finally:
        kafka.close()
    yield log
    for future in admin.delete_topics([name, f"{name}-out"]).values():
        future.result(30)


def app_config(bootstrap: str, log: History, state_dir: Path) -> AppConfig:
    return timed_config(
        app_id=unique("timed"),
        kafka={"bootstrap_servers": bootstrap},
        inputs=[{"topic": log.topic, "partitions": 4}],
        outputs=[{"topic": f"{log.topic}-out", "partitions": 1}],
        state_dir=str(state_dir),
        spark={"shards": 2},
    )


def built_items(state_dir: Path, config: AppConfig) -> list[tuple[str, bytes, bytes]]:
    """Every processor's items (stored bytes), merged; each key in one processor only."""
    app = timed_app(config)
    items: list[tuple[str, bytes, bytes]] = []
    for j in (0, 1):
        database = ProcessorDatabase.open_read_only(state_dir / f"processor-{j}")
        try:
            items += state_items(database, app)
        finally:
            database.close()
    assert len({(store, key) for store, key, _ in items}) == len(items)
    return sorted(items)


def test_backfill_from_kafka_gives_every_key_its_live_time_state_and_continues_as_live(
    kafka_bootstrap: str, topic: History, tmp_path: Path
) -> None:
    log = topic
    config = app_config(kafka_bootstrap, log, tmp_path / "state")
    app = timed_app(config)
    live, _outputs = live_run(app, log, log.written)
    read, dead = backfill_in_own_jvm(config)
    assert read == len(log.written)  # ticks and markers read too
    assert dead > 0  # late records: for their windows, and for the growth
    built = built_items(tmp_path / "state", config)
    assert built == sorted(state_items(live, app))
    assert {store for store, _, _ in built} >= {"splitstate.time", "splitstate.due"}

    # more records and ticks, then each processor goes on from its built state
    longer, tail = extended(log, seed=42)
    _all, outputs = live_run(app, longer, longer.written)
    _head, head = live_run(app, log, log.written)
    assert outputs[: len(head)] == head
    expected = outputs[len(head) :]
    continued: list[Any] = []
    for j in (0, 1):
        path = tmp_path / "state" / f"processor-{j}"
        stored = ProcessorDatabase.open_read_only(path)
        fixed = dict(stored.identity.fixed)  # as the runtime's (inputs and key hash too)
        stored.close()
        identity = DatabaseIdentity(config.app_id, j, fixed)
        with ProcessorDatabase.open(path, identity, app.store_specs()) as database:
            mine = [w for w in tail if bucket(w[0], B, 2) == j]
            processor = new_processor(app, log)
            continued += live_run(app, log, mine, database=database, processor=processor)[1]
    finals = [o for o in expected if b'"start"' in (o.value or b"")]
    assert finals, "windows close in the tail"
    assert sorted(o.value or b"" for o in continued) == sorted(o.value or b"" for o in expected)
    emitted = [(o.key, o.value) for o in [*head, *continued] if b'"start"' in (o.value or b"")]
    assert len(emitted) == len(set(emitted))  # each window's final once


def test_backfill_from_a_parquet_archive_keeps_the_ticks(
    kafka_bootstrap: str, topic: History, tmp_path: Path
) -> None:
    log = topic
    archive = tmp_path / "archive"
    archive.mkdir()
    table = records_table(log.rows()).drop_columns(["topic"])  # an archive of one topic
    pq.write_table(table.slice(0, table.num_rows // 2), archive / "part-0.parquet")
    pq.write_table(table.slice(table.num_rows // 2), archive / "part-1.parquet")
    config = app_config(kafka_bootstrap, log, tmp_path / "state")
    app = timed_app(config)
    live, _outputs = live_run(app, log, log.written)
    read, _dead = backfill_in_own_jvm(config, archive)
    assert read == len(log.written)
    assert built_items(tmp_path / "state", config) == sorted(state_items(live, app))
