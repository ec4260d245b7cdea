"""`backfill` through a shrink and a partition grown again: the state is each key's records
in the order produced, deleted partitions included.

The input's history is 4 -> 8 -> 5 -> 7, recorded by hand in the topic registry with the
offsets of the markers written into the topic (growth markers in the parents, drain markers
in the deleted partitions 5, 6, 7; the survivors' holds and the re-grown partitions' starts
measured as `expand` measures them). A key of partition 5 (at 8 partitions) has records in
1, then 5 (first life), then 1 again (merged back by the shrink), then 5 (second life): ranks
per partition put all of 1's before all of 5's. Partition 7 stays deleted and holds the first
records of its keys, so the build must read it too. The app journals every record it applies
to a key, so the built state shows the order.

Records of the keys of 7 (at 8 partitions) stop at the shrink: the placement check on main
still judges late records by growth fences only, and would drop their records in 3 after the
shrink's hold (the history's late rule, ``home_at``, comes with the runtime's part of issue
34).
"""

from __future__ import annotations

import multiprocessing
import random
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from framework import App, AppConfig, Output, Record
from framework.bootstrap.backfill import backfill
from framework.config import ConfigError
from framework.coordination.registry import REGISTRY_TOPIC, Growth, TopicEntry, TopicRegistry
from framework.kafka import Clients
from rebalance import Grow, Shrink, TopicHistory, bucket, key_hash
from statestore import KeyState, ProcessorDatabase
from tests.integration.harness import unique

pytestmark = pytest.mark.integration

N = 4
COUNT_HEADER = "splitstate.count"
MARKER_HEADER = "splitstate.marker"


def journal_app(config: AppConfig) -> App:
    """An app whose state per key is where each record it applied was, in order."""
    app = App(config)
    app.store("journal")

    @app.processor()
    def note(record: Record[bytes | None], state: KeyState[list[Any]]) -> list[Output]:
        state.set([*(state.get() or []), [record.partition, record.offset]])
        return []

    return app


class Log:
    """Writes the input topic partition by partition, knowing each record's offset."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
        )
        self.ends: dict[int, int] = defaultdict(int)
        #: each key's records, in the order produced
        self.produced: dict[bytes, list[tuple[int, int]]] = defaultdict(list)
        self.failures: list[str] = []

    def record(self, key: bytes, count: int) -> None:
        """A record of ``key`` placed with ``count`` partitions."""
        partition = bucket(key_hash(key), N, count)
        self.produced[key].append((partition, self._append(partition, key, COUNT_HEADER, count)))

    def marker(self, partition: int, marker_id: str) -> int:
        """A keyless marker record; its offset."""
        return self._append(partition, None, MARKER_HEADER, marker_id)

    def _append(self, partition: int, key: bytes | None, header: str, value: object) -> int:
        offset = self.ends[partition]
        self.ends[partition] += 1
        self.producer.produce(
            self.topic,
            key=key,
            value=f"{partition}:{offset}".encode(),
            partition=partition,
            headers=[(header, str(value).encode())],
            on_delivery=self._delivered,
        )
        self.producer.poll(0)
        return offset

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        where = f"{message.partition()}:{message.offset()}".encode()
        if error is not None or message.value() != where:
            self.failures.append(f"{error} {message.value()!r} landed at {where!r}")

    def close(self) -> None:
        assert self.producer.flush(30) == 0
        assert not self.failures, self.failures[:5]


def write_history(log: Log, keys: list[bytes], rng: random.Random) -> TopicHistory:
    """Write 4 -> 8 -> 5 -> 7 into the topic as `expand` and producers would; its history."""
    seven = [k for k in keys if bucket(key_hash(k), N, 8) == 7]  # deleted for good at 5

    def phase(count: int, writers: list[bytes]) -> None:
        for _ in range(12 * len(writers)):
            log.record(rng.choice(writers), count)

    topic = log.topic
    phase(4, keys)
    grow8 = Grow(
        8,
        dict.fromkeys(range(4, 8), 0),
        {c: log.marker(c - 4, f"{topic}/1/8/{c}") for c in range(4, 8)},
    )
    phase(8, keys)
    holds = {t: log.ends[t] for t in (1, 2, 3)}  # the survivors' ends, before the count
    drains = {d: log.marker(d, f"{topic}/2/5/{d}/drain") for d in (5, 6, 7)}
    shrink5 = Shrink(5, holds, drains)
    rest = [k for k in keys if k not in seven]
    phase(5, rest)
    starts = {c: log.ends[c] for c in (5, 6)}  # their ends, before the count
    grow7 = Grow(7, starts, {c: log.marker(c - 4, f"{topic}/3/7/{c}") for c in (5, 6)})
    phase(7, rest)
    log.close()
    return TopicHistory(topic, (4, 8, 5, 7), (grow8, shrink5, grow7))


def _backfill_child(config_json: str, out: Any) -> None:
    manifest = backfill(journal_app(AppConfig.model_validate_json(config_json))).manifest
    out.put((manifest.records_read, manifest.records_dead_lettered))


class _Built:
    """What the test reads of a backfill's result."""

    def __init__(self, records_read: int, records_dead_lettered: int) -> None:
        self.records_read, self.records_dead_lettered = records_read, records_dead_lettered

    @property
    def manifest(self) -> _Built:
        return self


def backfill_in_own_jvm(config: AppConfig) -> _Built:
    """``backfill`` in a child process: Spark's Kafka source needs its jars on the driver's
    classpath, which only a JVM started with them has (another test of this worker may have
    started Spark without them)."""
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    child = context.Process(target=_backfill_child, args=(config.model_dump_json(), out))
    child.start()
    child.join(600)
    assert child.exitcode == 0, child.exitcode
    read, dead = out.get(timeout=10)
    return _Built(read, dead)


def journals(state_dir: Path) -> tuple[dict[bytes, list[tuple[int, int]]], dict[Any, int]]:
    """Each key's journal over every processor's state, and the offsets they cover."""
    found: dict[bytes, list[tuple[int, int]]] = {}
    offsets: dict[Any, int] = {}
    for path in sorted(p for p in state_dir.glob("processor-*") if p.is_dir()):
        database = ProcessorDatabase.open_read_only(path)
        try:
            for key, journal in database.items("journal"):
                assert key not in found, f"{key!r} is in two processors"
                found[key] = [(p, o) for p, o in journal]
            offsets.update(database.offsets())
        finally:
            database.close()
    return found, offsets


@pytest.fixture
def topics(kafka_bootstrap: str) -> Iterator[tuple[str, str]]:
    """A new input topic of 8 partitions (Kafka never removes one) and an output topic."""
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    names = (unique("lives-in"), unique("lives-out"))
    futures = admin.create_topics([NewTopic(names[0], 8), NewTopic(names[1], 1)])
    for future in futures.values():
        future.result(30)
    yield names
    for future in admin.delete_topics(list(names)).values():
        future.result(30)


def registry_of(config: AppConfig) -> TopicRegistry:
    """The topic registry of ``config``'s cluster (its topic created where missing)."""
    kafka = Clients.of(config)
    registry = TopicRegistry(kafka)
    kafka.create_topics([registry.topic_spec()])
    return registry


def app_config(kafka_bootstrap: str, tmp_path: Path, topics: tuple[str, str]) -> AppConfig:
    return AppConfig.load(
        None,
        app_id=unique("lives"),
        kafka={"bootstrap_servers": kafka_bootstrap},
        inputs=[{"topic": topics[0], "partitions": 7}],
        outputs=[{"topic": topics[1], "partitions": 1}],
        initial_processors=2,
        processors=2,
        state_dir=str(tmp_path / "state"),
        spark={"shards": 2},
    )


@pytest.mark.spark
def test_backfill_applies_each_keys_records_in_produced_order_through_a_shrink_and_a_regrowth(
    kafka_bootstrap: str, tmp_path: Path, topics: tuple[str, str]
) -> None:
    keys = [f"key-{i:03d}".encode() for i in range(48)]
    homes = {bucket(key_hash(k), N, 8) for k in keys}
    assert homes == set(range(8)), homes  # every partition at 8 has keys
    log = Log(kafka_bootstrap, topics[0])
    history = write_history(log, keys, random.Random(34))
    config = app_config(kafka_bootstrap, tmp_path, topics)
    registry_of(config).write(TopicEntry(history))

    result = backfill_in_own_jvm(config)

    built, offsets = journals(tmp_path / "state")
    regrown = [k for k in keys if bucket(key_hash(k), N, 8) in (5, 6)]
    for key in regrown:  # 1, 5, 1, 5 (or 2, 6, 2, 6): per-partition ranks apply 1's first
        lives = [p for p, _ in log.produced[key]]
        assert lives != sorted(lives), (key, lives)  # the key's partitions interleave
        assert built[key] == log.produced[key], key
    deleted = [k for k in keys if bucket(key_hash(k), N, 8) == 7]
    for key in deleted:  # 3, then 7 (deleted since): 7 is read too
        assert 7 in {p for p, _ in log.produced[key]}, key
        assert built.get(key) == log.produced[key], key
    assert built == dict(log.produced)
    assert result.manifest.records_read == sum(log.ends.values())  # markers too: all 8 read
    assert result.manifest.records_dead_lettered == 0
    assert offsets == {(topics[0], p): log.ends[p] for p in range(8)}


def test_backfill_refuses_while_an_input_grows_or_shrinks(
    kafka_bootstrap: str, tmp_path: Path, topics: tuple[str, str]
) -> None:
    config = app_config(kafka_bootstrap, tmp_path, topics)
    registry = registry_of(config)
    grown = TopicHistory.of(topics[0], [4, 8], {4: 10, 5: 11, 6: 12, 7: 13})
    shrinking = grown.shrunk(5, {1: 20, 2: 21, 3: 22}).with_drains({5: 30})
    now = int(time.time() * 1000)
    registry.write(TopicEntry(shrinking, growth=Growth(5, now, kind="shrink", markers={5: 30})))
    with pytest.raises(ConfigError) as refused:
        backfill(journal_app(config))
    text = str(refused.value)
    assert (
        f"'{topics[0]}' is shrinking to 5 partitions (drain markers of [6, 7] not recorded)" in text
    )
    assert "run it again to resume it" in text

    growing = TopicHistory.of(topics[0], [4, 8], {4: 10, 5: 11})
    # another history of the topic: its entry removed first (a history never goes back), a
    # tombstone of each of its records' keys
    kafka = Clients.of(config)
    try:
        keys = {
            r.key
            for r in kafka.read_log(REGISTRY_TOPIC)
            if r.key is not None and r.key.split(b"/", 1)[0] == topics[0].encode()
        }
        kafka.append(REGISTRY_TOPIC, [(key, None) for key in keys])
    finally:
        kafka.close()
    registry.write(TopicEntry(growing, growth=Growth(8, now)))
    with pytest.raises(ConfigError) as refused:
        backfill(journal_app(config))
    assert f"'{topics[0]}' is growing to 8 partitions (markers of [6, 7] not recorded)" in str(
        refused.value
    )
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").glob("processor-*"))
