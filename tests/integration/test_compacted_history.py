"""A compacted input through partition-count changes, with the log cleaner, and every way state
is built: live processors, a processor that lost its state, a joining processor, a backfill
(issue 34, part 2; the seed's section 9). Old partitions lose their stale values; every path
that builds state skips the compaction tombstones and holds each key's latest value.
"""

from __future__ import annotations

import random
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from framework.coordination.registry import TopicRegistry
from framework.kafka import Clients
from framework.loader import load_app
from framework.producer import SplitstateProducer
from framework.runtime.loop import ProcessorRuntime
from rebalance import bucket, key_hash
from statestore import ProcessorDatabase, processor_path
from tests.integration.compacted_reads import (
    FAST_COMPACTION,
    Read,
    read_topic,
)
from tests.integration.harness import Supervised, splitstate, unique, wait_for, write_config
from tests.integration.test_backfill import state_of
from tests.integration.test_scaling import scale_to, wait_for_generation

pytestmark = pytest.mark.integration


TABLE = "tests.integration.apps.table:app"
LEASE = {"producer_lease_ms": 4000, "producer_delivery_timeout_ms": 3000}
KEYS = [f"row-{i}".encode() for i in range(300)]
#: the input's partition counts: its first, then each `splitstate expand`
HISTORIES = [
    pytest.param([4, 8], id="4-8"),
    pytest.param([4, 8, 5, 7], id="4-8-5-7"),
]


@pytest.fixture(scope="module")
def fast_cleaner(kafka_admin: AdminClient) -> Iterator[None]:
    """The broker's log cleaner looks for work every 200 ms (its default: every 15 s) while
    this module runs (``log.cleaner.backoff.ms`` is a dynamic broker config)."""
    nodes = kafka_admin.describe_cluster().result(30).nodes

    def alter(operation: AlterConfigOpType) -> None:
        entry = ConfigEntry("log.cleaner.backoff.ms", "200", incremental_operation=operation)
        resources = [
            ConfigResource(ResourceType.BROKER, str(node.id), incremental_configs=[entry])
            for node in nodes
        ]
        for future in kafka_admin.incremental_alter_configs(resources).values():
            future.result(30)

    alter(AlterConfigOpType.SET)
    try:
        yield
    finally:
        alter(AlterConfigOpType.DELETE)


class TableWriter(threading.Thread):
    """Writes values of ``KEYS`` with ``SplitstateProducer``, round after round in a shuffled
    order, deleting about a fifth of them (genuine tombstones) once ``deleting`` is set; keeps
    what each key holds last (``truth``: ``None`` when deleted)."""

    def __init__(self, bootstrap: str, topic: str, seed: int) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.producer = SplitstateProducer({"bootstrap.servers": bootstrap}, [topic])
        self.rng = random.Random(seed)
        self.truth: dict[bytes, str | None] = {}
        self.written = 0
        self.deleting = threading.Event()
        self.stop_event = threading.Event()
        self.failed: list[object] = []

    def write(self, key: bytes, producer: SplitstateProducer | None = None) -> None:
        """One record of ``key``: a new value or, while deleting, sometimes a delete."""
        deleted = self.deleting.is_set() and self.rng.random() < 0.2
        value = None if deleted else f"{key.decode()}:{self.written}"
        (producer or self.producer).produce(self.topic, key, value, on_delivery=self._delivered)
        self.truth[key] = value
        self.written += 1

    def _delivered(self, error: object, _message: object) -> None:
        if error is not None:
            self.failed.append(error)

    def write_all(self) -> None:
        """Every key once, in a shuffled order."""
        for key in self.rng.sample(KEYS, len(KEYS)):
            self.write(key)
        self.producer.poll(0)

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.write_all()
            time.sleep(0.05)

    def finish(self) -> None:
        """Stop, then write every key once more (so each is written after the last count
        change, with its compaction tombstones), and flush."""
        self.stop_event.set()
        self.join(60)
        self.write_all()
        assert self.producer.flush(60) == 0
        assert self.failed == []

    def roll_segments(self, counts: list[int]) -> None:
        """A record in every partition Kafka has, so that its active segment (older than
        ``segment.ms``) rolls and the log cleaner may clean the rest: a filler key in each
        partition of the current count, and in each deleted one a compaction tombstone (the
        only record a deleted partition takes) of a filler key that was placed there."""
        initial, now, created = counts[0], counts[-1], max(counts)
        producer = SplitstateProducer(
            {"bootstrap.servers": self.bootstrap}, [self.topic], compaction_tombstones_cached=0
        )
        try:
            for partition in range(created):
                count = now if partition < now else created
                self.write(filler_key(initial, partition, count), producer)
            assert producer.flush(30) == 0
        finally:
            producer.close()

    def latest(self) -> dict[bytes, str]:
        """Each key not deleted, with its latest value."""
        return {k: v for k, v in self.truth.items() if v is not None}

    def close(self) -> None:
        """Close the producer."""
        self.producer.close()


def filler_key(initial: int, partition: int, partitions: int) -> bytes:
    """A key that ``partitions`` partitions (grown from ``initial``) place on ``partition``."""
    for i in range(100_000):
        key = f"filler-{i}".encode()
        if bucket(key_hash(key), initial, partitions) == partition:
            return key
    raise AssertionError("no filler key")


def stale_values(records: list[Read], counts: list[int]) -> list[Read]:
    """Values (not tombstones) of a row key in a partition the current count does not place
    it on: left behind by a count change."""
    stale = []
    for record in records:
        if record.key is None or record.value is None or not record.key.startswith(b"row-"):
            continue
        if record.partition != bucket(key_hash(record.key), counts[0], counts[-1]):
            stale.append(record)
    return stale


@dataclass
class CompactedHistory:
    """A compacted input through ``counts`` under a stream of values and deletes, compacted
    since; two apps (bootstrap replay, bootstrap snapshot) processed all of it."""

    topic: str
    counts: list[int]
    bootstrap: str
    replay: Path  # the config of the app with bootstrap: replay
    snapshot: Path  # the config of the app with bootstrap: snapshot
    truth: dict[bytes, str]  # every key not deleted -> its latest value

    @property
    def created(self) -> int:
        """The partitions Kafka has."""
        return max(self.counts)

    def owner(self, key: bytes, processors: int) -> int:
        """The processor of ``key`` among ``processors`` (B = 2)."""
        return bucket(bucket(key_hash(key), self.counts[0], self.counts[-1]), 2, processors)

    def settled(self) -> list[Read]:
        """The topic's records once the log cleaner stopped changing them (two reads 2 s
        apart alike)."""
        records = read_topic(self.bootstrap, self.topic, self.created)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            time.sleep(2)
            again = read_topic(self.bootstrap, self.topic, self.created)
            if [(r.partition, r.offset) for r in again] == [
                (r.partition, r.offset) for r in records
            ]:
                return again
            records = again
        raise AssertionError("the log cleaner kept changing the topic")


def table_config(tmp: Path, kafka: str, topic: str, name: str, **fields: Any) -> Path:
    directory = tmp / name
    directory.mkdir()
    return write_config(
        directory,
        kafka,
        app_id=unique(name),
        inputs=[{"topic": topic, "partitions": 4, **LEASE}],
        initial_processors=2,
        processors=2,
        scaling={"ready_lag": 50},
        **fields,
    )


def committed(bootstrap: str, config: Path, topic: str, partitions: int) -> dict[int, int]:
    """The app's group's committed offset of each partition of ``topic`` (0: none)."""
    group = load_app(TABLE, config).config.app_id
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 30)
        return {tp.partition: max(tp.offset, 0) for tp in found}
    finally:
        consumer.close()


def processed_everything(bootstrap: str, config: Path, topic: str, partitions: int) -> bool:
    """Whether the app's group committed the end of every partition of ``topic``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("ends")})
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()
    done = committed(bootstrap, config, topic, partitions)
    return all(done[p] >= end for p, end in ends.items())


def table_state(state_dir: Path) -> dict[bytes, str]:
    """Every processor's ``latest`` store, merged (a key held twice fails)."""
    values, _offsets = state_of(state_dir)
    return {key: value for (store, key), value in values.items() if store == "latest"}


def expand(config: Path, topic: str, partitions: int) -> None:
    changed = splitstate(
        "expand", TABLE, "--config", str(config), "--topic", topic,
        "--partitions", str(partitions), timeout=180,
    )  # fmt: skip
    assert changed.returncode == 0, changed.stderr


@pytest.fixture(scope="module", params=HISTORIES)
def compacted_history(
    request: pytest.FixtureRequest,
    kafka_bootstrap: str,
    kafka_admin: AdminClient,
    tmp_path_factory: pytest.TempPathFactory,
    fast_cleaner: None,
) -> CompactedHistory:
    counts: list[int] = request.param
    tmp = tmp_path_factory.mktemp("compacted")
    topic = unique("table")
    created = kafka_admin.create_topics([NewTopic(topic, counts[0], 1, config=FAST_COMPACTION)])
    created[topic].result(30)
    replay = table_config(tmp, kafka_bootstrap, topic, "replay", bootstrap="replay")
    snapshot = table_config(
        tmp, kafka_bootstrap, topic, "snapshot", snapshots={"interval_seconds": 2}
    )
    for config in (replay, snapshot):
        made = splitstate("topics", "create", TABLE, "--config", str(config))
        assert made.returncode == 0, made.stderr
    kafka = Clients({"bootstrap.servers": kafka_bootstrap})
    try:
        assert TopicRegistry(kafka).read()[topic].compacted
    finally:
        kafka.close()
    runners = [
        Supervised(TABLE, config, config.parent / "state", config.parent / "run.log")
        for config in (replay, snapshot)
    ]
    writer = TableWriter(kafka_bootstrap, topic, seed=34)
    try:
        writer.start()
        time.sleep(2)
        before = stale_values(
            read_topic(kafka_bootstrap, topic, counts[0]), [counts[0], counts[-1]]
        )
        assert before, "no key the changes will move has a value yet: nothing would be stale"
        for count in counts[1:]:
            expand(replay, topic, count)
            writer.deleting.set()
            time.sleep(2)
        writer.finish()
        stale = stale_values(read_topic(kafka_bootstrap, topic, max(counts)), counts)
        deadline = time.monotonic() + 90
        while stale:
            assert time.monotonic() < deadline, f"the log cleaner left {stale[:5]}"
            time.sleep(0.3)  # past segment.ms
            writer.roll_segments(counts)
            stale = stale_values(read_topic(kafka_bootstrap, topic, max(counts)), counts)
        left = len(read_topic(kafka_bootstrap, topic, max(counts)))
        assert left < writer.written / 2, (left, writer.written)  # the log cleaner ran
        for config in (replay, snapshot):
            wait_for(
                lambda config=config: processed_everything(  # type: ignore[misc]
                    kafka_bootstrap, config, topic, max(counts)
                ),
                120,
                f"{config.parent.name} to process every record",
            )
    finally:
        writer.stop_event.set()
        writer.close()
        for runner in runners:
            assert runner.stop() == 0, runner.output()[-3000:]
    return CompactedHistory(topic, counts, kafka_bootstrap, replay, snapshot, writer.latest())


def test_old_partitions_lose_stale_values_and_processors_hold_the_latest(
    compacted_history: CompactedHistory,
) -> None:
    history = compacted_history
    assert stale_values(history.settled(), history.counts) == []
    for config in (history.replay, history.snapshot):
        assert table_state(config.parent / "state") == history.truth


def test_a_processor_that_lost_its_state_rebuilds_the_latest_values(
    compacted_history: CompactedHistory,
) -> None:
    history = compacted_history
    app = load_app(TABLE, history.replay)
    state_dir = app.config.app_state_dir
    shutil.rmtree(processor_path(state_dir, 0))
    done = committed(history.bootstrap, history.replay, history.topic, history.created)
    below = [
        r
        for r in history.settled()
        if bucket(r.partition, 2, 2) == 0 and r.offset < done[r.partition]
    ]
    deadline = time.monotonic() + 120
    rebuilt = ProcessorRuntime(app, 0).run(
        until=lambda stats: stats.restored >= len(below) or time.monotonic() > deadline
    )
    assert rebuilt.restored == len(below) and rebuilt.records == 0
    database = ProcessorDatabase.open_read_only(processor_path(state_dir, 0))
    try:
        held = dict(database.items("latest"))
    finally:
        database.close()
    assert held == {k: v for k, v in history.truth.items() if history.owner(k, 2) == 0}


@pytest.mark.parametrize("bootstrap", ["replay", "snapshot"])
def test_a_joining_processor_gains_the_latest_values(
    compacted_history: CompactedHistory, bootstrap: str
) -> None:
    history = compacted_history
    config = history.replay if bootstrap == "replay" else history.snapshot
    runner = Supervised(TABLE, config, config.parent / "state", config.parent / "join.log")
    try:
        wait_for(lambda: len(runner.pids()) == 2, 60, "both processors")
        wait_for_generation(config, scale_to(config, 3, TABLE), 180, TABLE)
    finally:
        assert runner.stop() == 0, runner.output()[-3000:]
    log = runner.output()
    assert "processor 2 took over" in log
    if bootstrap == "snapshot":
        assert "out of its snapshot" in log and "catching up by replay" not in log
    assert table_state(config.parent / "state") == history.truth


@pytest.mark.spark
def test_a_backfill_builds_the_latest_values(
    compacted_history: CompactedHistory, tmp_path: Path
) -> None:
    history = compacted_history
    data = yaml.safe_load(history.replay.read_text())
    data["state_dir"] = str(tmp_path / "backfill")
    config = tmp_path / "backfill.yaml"
    config.write_text(yaml.safe_dump(data))
    built = splitstate("backfill", TABLE, "--config", str(config), "--replace", timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    assert table_state(tmp_path / "backfill") == history.truth
