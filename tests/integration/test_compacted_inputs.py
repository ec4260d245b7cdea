"""Compacted inputs across partition-count changes, on the real broker with its log cleaner
(issue 34, part 2; the seed's section 9).

A compacted input (``cleanup.policy=compact``) keeps the last value per key. After a growth a
key's new records go to a child partition; its old value would stay in the parent forever, and
a rebuild from the log would bring back a key deleted since. The registry records whether a
topic is compacted when it is first registered; splitstate's producers then also write a
compaction tombstone (no value, header ``splitstate.compaction``) of the key to each earlier
partition, and every path that builds state skips those tombstones.
"""

from __future__ import annotations

import random
import shutil
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from framework.clock import SYSTEM_CLOCK
from framework.coordination.registry import TopicEntry, TopicRegistry
from framework.growth.compaction import COMPACTION_HEADER
from framework.growth.lease import RegistryLease
from framework.growth.placement import COUNT_HEADER
from framework.kafka import Clients
from framework.loader import load_app
from framework.producer import SplitstateProducer
from framework.records import EncodedOutput
from framework.runtime.delivery import BatchWriter
from framework.runtime.loop import ProcessorRuntime
from rebalance import TopicHistory, bucket, key_hash
from statestore import ProcessorDatabase, processor_path
from tests.integration.harness import Supervised, splitstate, unique, wait_for, write_config
from tests.integration.test_backfill import state_of
from tests.integration.test_scaling import scale_to, wait_for_generation

pytestmark = pytest.mark.integration

#: a compacted topic whose log cleaner runs soon after each write
FAST_COMPACTION = {
    "cleanup.policy": "compact",
    "segment.ms": "100",
    "min.cleanable.dirty.ratio": "0.01",
    "min.compaction.lag.ms": "0",
    "delete.retention.ms": "500",
}


class Read:
    """One record as read back: where it is, its key, value and headers."""

    def __init__(self, message: Any) -> None:
        self.partition: int = message.partition()
        self.offset: int = message.offset()
        self.key: bytes | None = message.key()
        self.value: bytes | None = message.value()
        self.headers: dict[str, bytes] = {
            name: value for name, value in message.headers() or [] if isinstance(value, bytes)
        }

    def __repr__(self) -> str:
        return f"[{self.partition}]@{self.offset} {self.key!r}={self.value!r} {self.headers}"


def log_ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """Each partition's log end now: its high watermark. A read_uncommitted view gives it;
    a read_committed one gives the last stable offset, which stands before any transaction
    not decided yet, or decided but whose markers Kafka has not written yet."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("ends"),
            "isolation.level": "read_uncommitted",
        }
    )
    try:
        ends: dict[int, int] = {}
        for p in range(partitions):
            found = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            assert found is not None, f"no watermarks of {topic} [{p}] in 10 s"
            ends[p] = found[1]
        return ends
    finally:
        consumer.close()


def read_topic(bootstrap: str, topic: str, partitions: int) -> list[Read]:
    """Every committed record of ``topic``'s log as it is now, in offset order per partition.

    It reads read_committed up to each partition's log end (``log_ends``): a read_committed
    consumer's position passes a transaction's records (and aborted ones, and markers) only
    once its markers are written, so a transaction that ``commit_transaction`` just ended is
    waited for, not cut off at the last stable offset. Fails if that takes over a minute."""
    ends = log_ends(bootstrap, topic, partitions)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("read"),
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        found: list[Read] = []
        reached = dict.fromkeys(ends, 0)
        deadline = time.monotonic() + 60
        while behind := {p: end for p, end in ends.items() if reached[p] < end}:
            assert time.monotonic() < deadline, (
                f"read_topic: {topic} stayed short of its log ends in 60 s: "
                f"reached {reached}, ends {behind} (a transaction left open?)"
            )
            for message in consumer.consume(5000, 0.5):
                if message.error() is None:
                    found.append(Read(message))
            for position in consumer.position([TopicPartition(topic, p) for p in ends]):
                reached[position.partition] = max(reached[position.partition], position.offset)
        return found
    finally:
        consumer.close()


@pytest.mark.parametrize("outcome", ["commit", "abort"])
def test_read_topic_waits_for_a_transaction_in_the_log_to_be_decided(
    kafka_bootstrap: str, topic_factory: Any, outcome: str
) -> None:
    """``read_topic`` returns a transaction the log held when it was called once it is
    committed (none of it once aborted). Kafka writes the commit markers after
    ``commit_transaction`` returns; until then the partitions look to a reader as if the
    transaction were still open: their last stable offset stands before it. ``read_topic``
    took that offset as the end and returned nothing of the transaction (seen on CI). Here
    the transaction is still open when ``read_topic`` is called and decided while it reads."""
    topic = topic_factory(4)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": unique("tx")})
    producer.init_transactions(30)
    producer.begin_transaction()
    for p in range(4):
        producer.produce(topic, value=b"v", partition=p)
    assert producer.flush(30) == 0  # in the log, its transaction open
    with ThreadPoolExecutor(1) as pool:
        reading = pool.submit(read_topic, kafka_bootstrap, topic, 4)
        wait([reading], timeout=2)  # time for read_topic to look up the ends before the commit
        if outcome == "commit":
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
        started = time.monotonic()
        records = reading.result(timeout=90)
    assert time.monotonic() - started < 30  # it saw the decision, not its deadline
    expected = [0, 1, 2, 3] if outcome == "commit" else []
    assert sorted(r.partition for r in records) == expected, records


@pytest.mark.parametrize(
    ("policy", "compacted"), [("compact", True), ("compact,delete", True), ("delete", False)]
)
def test_registration_records_whether_the_topic_is_compacted(
    kafka_bootstrap: str, topic_factory: Any, policy: str, compacted: bool
) -> None:
    topic = topic_factory(2, config={"cleanup.policy": policy})
    producer = SplitstateProducer({"bootstrap.servers": kafka_bootstrap}, [topic])
    producer.close()
    kafka = Clients({"bootstrap.servers": kafka_bootstrap})
    try:
        assert TopicRegistry(kafka).read()[topic].compacted is compacted
    finally:
        kafka.close()


def keys_moving(initial: int, counts: list[int], how_many: int) -> list[bytes]:
    """Keys whose partition differs between the first and the last of ``counts``."""
    found = []
    for i in range(100_000):
        key = f"user-{i}".encode()
        h = key_hash(key)
        if bucket(h, initial, counts[0]) != bucket(h, initial, counts[-1]):
            found.append(key)
            if len(found) == how_many:
                return found
    raise AssertionError("not enough keys")


@pytest.fixture
def grown_compacted(kafka_bootstrap: str, topic_factory: Any) -> Iterator[str]:
    """A compacted topic of 8 partitions that the registry records as grown from 4."""
    topic = topic_factory(8, config={"cleanup.policy": "compact"})
    kafka = Clients({"bootstrap.servers": kafka_bootstrap})
    try:
        registry = TopicRegistry(kafka)
        registry.ensure_topic()
        history = TopicHistory.of(topic, [4, 8], dict.fromkeys(range(4, 8), 0))
        registry.write(TopicEntry(history, compacted=True))
    finally:
        kafka.close()
    yield topic


def test_a_producer_tombstones_a_moved_keys_earlier_partition_once(
    kafka_bootstrap: str, grown_compacted: str
) -> None:
    topic = grown_compacted
    moved = keys_moving(4, [4, 8], 20)
    stayed = [k for k in (f"stay-{i}".encode() for i in range(200)) if key_hash(k) % 8 < 4][:20]
    producer = SplitstateProducer({"bootstrap.servers": kafka_bootstrap}, [topic])
    failed: list[object] = []
    try:
        for round_ in range(3):
            for key in [*moved, *stayed]:
                producer.produce(
                    topic,
                    key,
                    f"v{round_}".encode(),
                    on_delivery=lambda e, _m: failed.append(e) if e is not None else None,
                )
        assert producer.flush(30) == 0
    finally:
        producer.close()
    assert failed == []
    records = read_topic(kafka_bootstrap, topic, 8)
    tombstones = [r for r in records if COMPACTION_HEADER in r.headers]
    assert sorted(r.key for r in tombstones if r.key is not None) == sorted(moved)
    for record in tombstones:
        assert record.key is not None and record.value is None
        h = key_hash(record.key)
        assert record.partition == bucket(h, 4, 4) != bucket(h, 4, 8)
        assert record.headers[COMPACTION_HEADER] == f"{topic}/1".encode()
        assert record.headers[COUNT_HEADER] == b"8"
    values = [r for r in records if COMPACTION_HEADER not in r.headers]
    assert len(values) == 3 * (len(moved) + len(stayed))
    assert all(r.partition == bucket(key_hash(r.key or b""), 4, 8) for r in values)


def test_without_a_cache_every_record_of_a_moved_key_tombstones(
    kafka_bootstrap: str, grown_compacted: str
) -> None:
    topic = grown_compacted
    (key,) = keys_moving(4, [4, 8], 1)
    producer = SplitstateProducer(
        {"bootstrap.servers": kafka_bootstrap}, [topic], compaction_tombstones_cached=0
    )
    try:
        for value in (b"a", b"b", b"c"):
            producer.produce(topic, key, value)
    finally:
        producer.close()
    records = read_topic(kafka_bootstrap, topic, 8)
    assert len([r for r in records if COMPACTION_HEADER in r.headers]) == 3


def test_a_topic_not_compacted_gets_none(kafka_bootstrap: str, topic_factory: Any) -> None:
    topic = topic_factory(8)
    kafka = Clients({"bootstrap.servers": kafka_bootstrap})
    try:
        registry = TopicRegistry(kafka)
        registry.ensure_topic()
        registry.write(TopicEntry(TopicHistory.of(topic, [4, 8], dict.fromkeys(range(4, 8), 0))))
    finally:
        kafka.close()
    producer = SplitstateProducer({"bootstrap.servers": kafka_bootstrap}, [topic])
    try:
        for key in keys_moving(4, [4, 8], 10):
            producer.produce(topic, key, b"v")
    finally:
        producer.close()
    assert [r for r in read_topic(kafka_bootstrap, topic, 8) if r.value is None] == []


@pytest.mark.parametrize("outcome", ["commit", "abort"])
def test_outputs_tombstone_in_their_transaction(
    kafka_bootstrap: str, grown_compacted: str, outcome: str
) -> None:
    """A processor's outputs to a compacted topic that grew (another app's input) write their
    compaction tombstones in the batch's transaction: both become visible, or neither."""
    topic = grown_compacted
    moved = keys_moving(4, [4, 8], 5)
    kafka = Clients({"bootstrap.servers": kafka_bootstrap})
    lease = RegistryLease(TopicRegistry(kafka), {topic: TopicRegistry(kafka).read()[topic]})
    producer = kafka.transactional_producer(unique("tx"))
    writer = BatchWriter(
        producer, lease, unique("dead"), lambda: False, SYSTEM_CLOCK, transactional=True
    )
    try:
        producer.begin()
        outputs = [
            EncodedOutput(topic, key, b"v", None, (topic, 0, i)) for i, key in enumerate(moved)
        ]
        assert writer.write(outputs, [], lambda _where: None) == []
        if outcome == "commit":
            producer.commit(30)
        else:
            producer.abort(30)
    finally:
        lease.close()
        producer.close()
        kafka.close()
    records = read_topic(kafka_bootstrap, topic, 8)
    tombstones = sorted(r.key or b"" for r in records if COMPACTION_HEADER in r.headers)
    values = sorted(r.key or b"" for r in records if COMPACTION_HEADER not in r.headers)
    if outcome == "commit":
        assert tombstones == values == sorted(moved)
    else:
        assert tombstones == values == []


# -- a compacted input through count changes, with the log cleaner, and every rebuild --------

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
