"""Growing an input topic 4 -> 6 -> 8 -> 13 partitions live, with `splitstate expand`.

Two producers write, per key, strictly increasing sequence numbers while the topic grows; one
app checks every (key, producer) sequence arrives in order with none missing (a dead letter
otherwise), a wordcount app on the same topic must end with exact counts, and every key's
state must sit in exactly the processor linear hashing gave it before any growth.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from framework.coordination.registry import TopicRegistry
from framework.growth.placement import COUNT_HEADER
from framework.kafka import Clients
from framework.producer import SplitstateProducer
from rebalance import bucket, key_hash
from statestore import ProcessorDatabase
from tests.integration.compacted_reads import read_topic
from tests.integration.harness import (
    Supervised,
    TopicReader,
    counts_by_word,
    splitstate,
    unique,
    write_config,
)

pytestmark = pytest.mark.integration

SEQUENCES = "tests.integration.apps.sequences:app"
WORDCOUNT = "examples.wordcount.app:app"
KEYS = 300
LEASE = {"producer_lease_ms": 4000, "producer_delivery_timeout_ms": 3000}


class SequenceProducer(threading.Thread):
    """Writes (key, seq) records with one long-lived producer until stopped."""

    def __init__(self, bootstrap: str, topic: str, name: str) -> None:
        super().__init__(daemon=True)
        self.topic, self.name = topic, name
        self.producer = SplitstateProducer({"bootstrap.servers": bootstrap}, [topic])
        self.sent: Counter[str] = Counter()
        self.stop_event = threading.Event()
        self.rng = random.Random(name)
        self.counts_used: set[int] = set()
        self.error: Exception | None = None
        self.unsent = 0

    def run(self) -> None:
        try:
            while not self.stop_event.is_set():
                for _ in range(200):
                    key = f"key-{self.rng.randrange(KEYS):03d}"
                    seq = self.sent[key] + 1
                    value = json.dumps({"producer": self.name, "seq": seq})
                    self.producer.produce(self.topic, key.encode(), value.encode())
                    self.sent[key] = seq
                self.counts_used.add(self.producer.partitioner.partitions(self.topic))
                self.producer.poll(0)
                time.sleep(0.05)
        except Exception as error:  # reported by the test
            self.error = error
        self.unsent = self.producer.close(60)


def stop_producing(producers: list[SequenceProducer], *readers: TopicReader) -> int:
    """Stop the producers (each must have delivered everything), then read until each
    reader has one output per record written; returns how many records were written."""
    for producer in producers:
        producer.stop_event.set()
    for producer in producers:
        producer.join(timeout=120)
        assert producer.error is None, producer.error
        assert producer.unsent == 0
    total = sum(sum(p.sent.values()) for p in producers)
    for reader in readers:
        reader.wait_for(lambda r: len(r.records) >= total, timeout=180, what="every output")
        reader.poll(2.0)
    return total


def read_all(
    bootstrap: str, topic: str, partitions: int
) -> list[tuple[int, bytes, dict[str, bytes]]]:
    """Every keyed record of ``topic`` up to each partition's log end now (read once its writers
    are done): its partition, key and headers (a header without a value as ``b""``)."""
    return [
        (
            record.partition,
            record.key,
            {
                name: value if isinstance(value, bytes) else b""
                for name, value in record.header_list
            },
        )
        for record in read_topic(bootstrap, topic, partitions)
        if record.key is not None
    ]


@dataclass(frozen=True)
class TwoApps:
    """The sequences and the wordcount app, 2 processors each, on one input of 4 partitions
    (topics created), each with its own directory and output topic."""

    seq_dir: Path
    count_dir: Path
    seq_config: Path
    count_config: Path
    seq_out: str
    counts_out: str


def two_apps(tmp_path: Path, kafka_bootstrap: str, topic: str) -> TwoApps:
    """Configure both apps on ``topic`` and create their topics."""
    seq_out, counts_out = unique("seq-out"), unique("counts-out")
    seq_dir, count_dir = tmp_path / "seq", tmp_path / "count"
    seq_dir.mkdir()
    count_dir.mkdir()
    common = {"initial_processors": 2, "processors": 2, "batch": {"max_records": 500}}
    seq_config = write_config(
        seq_dir,
        kafka_bootstrap,
        app_id=unique("sequences"),
        inputs=[{"topic": topic, "partitions": 4, **LEASE}],
        outputs=[{"topic": seq_out, "partitions": 4}],
        **common,
    )
    count_config = write_config(
        count_dir,
        kafka_bootstrap,
        app_id=unique("wordcount"),
        inputs=[{"topic": topic, "partitions": 4, **LEASE}],
        outputs=[{"topic": counts_out, "partitions": 4}],
        **common,
    )
    for app, config in ((SEQUENCES, seq_config), (WORDCOUNT, count_config)):
        created = splitstate("topics", "create", app, "--config", str(config))
        assert created.returncode == 0, created.stderr
    return TwoApps(seq_dir, count_dir, seq_config, count_config, seq_out, counts_out)


def test_growth_keeps_per_key_order_and_processors(tmp_path: Path, kafka_bootstrap: str) -> None:
    topic = unique("events")
    apps = two_apps(tmp_path, kafka_bootstrap, topic)
    seq_dir, count_dir, seq_config, count_config = (
        apps.seq_dir,
        apps.count_dir,
        apps.seq_config,
        apps.count_config,
    )
    seq_out, counts_out = apps.seq_out, apps.counts_out
    runners = [
        Supervised(SEQUENCES, seq_config, seq_dir / "state", seq_dir / "run.log"),
        Supervised(WORDCOUNT, count_config, count_dir / "state", count_dir / "run.log"),
    ]
    producers = [SequenceProducer(kafka_bootstrap, topic, name) for name in ("a", "b")]
    seq_reader = TopicReader(kafka_bootstrap, seq_out, 4)
    count_reader = TopicReader(kafka_bootstrap, counts_out, 4)
    try:
        for producer in producers:
            producer.start()
        seq_reader.wait_for(lambda r: len(r.records) > 2000, timeout=120, what="outputs")
        for partitions in (6, 8, 13):
            grown = splitstate(
                "expand",
                SEQUENCES,
                "--config",
                str(seq_config),
                "--topic",
                topic,
                "--partitions",
                str(partitions),
                timeout=180,
            )
            assert grown.returncode == 0, grown.stderr
            assert f"now has {partitions} partitions" in grown.stdout
            time.sleep(2)
        time.sleep(3)
        stop_producing(producers, seq_reader, count_reader)
    finally:
        logs = []
        for runner in runners:
            assert runner.stop() == 0, runner.output()[-3000:]
            logs.append(runner.output())
        seq_reader.close()
        count_reader.close()

    # producers switched counts as the registry changed, without restarting
    assert {4, 13} <= set().union(*(p.counts_used for p in producers))
    client: dict[str, str | int | float | bool] = {"bootstrap.servers": kafka_bootstrap}
    entry = TopicRegistry(Clients(client)).read()[topic]
    assert entry.history.counts == (4, 6, 8, 13)
    assert sorted(entry.history.thresholds) == list(range(4, 13))
    assert entry.growth is None
    assert "is held back" in logs[0]  # the gate was in force at some point

    check_sequences(seq_reader, producers)
    dead = read_all(kafka_bootstrap, f"{seq_config_id(seq_config)}-dead-letters", 1)
    assert dead == [], [h.get("splitstate.error") for _, _, h in dead[:3]]
    check_counts(count_reader, producers)
    for state_dir in (seq_dir / "state", count_dir / "state"):
        check_placement(state_dir)
    # records sit where linear hashing put them, with the count they were placed with
    for partition, raw_key, headers in read_all(kafka_bootstrap, topic, 13):
        placed = int(headers[COUNT_HEADER])
        assert partition == bucket(key_hash(raw_key), 4, placed)


def seq_config_id(config: Path) -> str:
    app_id: str = json.loads(json.dumps(yaml.safe_load(config.read_text())))["app_id"]
    return app_id


def check_sequences(reader: TopicReader, producers: list[SequenceProducer]) -> None:
    """Every (key, producer) sequence is exactly 1..n, in the order produced."""
    seen: dict[tuple[str, str], list[int]] = {}
    for _key, value, _headers in reader.records:
        assert value is not None
        data = json.loads(value)
        seen.setdefault((data["key"], data["producer"]), []).append(data["seq"])
    for producer in producers:
        for key, n in producer.sent.items():
            assert seen[(key, producer.name)] == list(range(1, n + 1)), (key, producer.name)


def check_counts(reader: TopicReader, producers: list[SequenceProducer]) -> None:
    """Wordcount over the same topic: each key's counts are exactly 1..n."""
    words = counts_by_word(reader.records)
    totals: Counter[str] = Counter()
    for producer in producers:
        totals.update(producer.sent)
    for key, n in totals.items():
        assert sorted(words[key]) == list(range(1, n + 1)), key


def check_placement(state_dir: Path) -> None:
    """Every key's state is in exactly the processor it had before any growth."""
    for j in (0, 1):
        database = ProcessorDatabase.open_read_only(state_dir / f"processor-{j}")
        try:
            for store in database.store_names():
                for raw_key, _value in database.items(store):
                    assert bucket(key_hash(raw_key), 2, 2) == j, raw_key
        finally:
            database.close()


def test_a_producer_started_after_a_growth_uses_the_new_count(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    topic = unique("late")
    config = write_config(
        tmp_path,
        kafka_bootstrap,
        app_id=unique("late"),
        inputs=[{"topic": topic, "partitions": 4, **LEASE}],
        initial_processors=2,
    )
    assert splitstate("topics", "create", SEQUENCES, "--config", str(config)).returncode == 0
    # through the config: raise the input's partitions, then `expand` without --topic
    data = yaml.safe_load(config.read_text())
    data["inputs"][0]["partitions"] = 7
    config.write_text(yaml.safe_dump(data))
    grown = splitstate("expand", SEQUENCES, "--config", str(config))
    assert f"{topic}: partitions 4 -> 7" in grown.stdout
    assert grown.returncode == 0, grown.stderr
    producer = SplitstateProducer({"bootstrap.servers": kafka_bootstrap}, [topic])
    keys = [f"k{i}".encode() for i in range(400)]
    for key in keys:
        producer.produce(topic, key, b"{}")
    assert producer.close() == 0
    found = read_all(kafka_bootstrap, topic, 7)
    assert len(found) == len(keys)
    for partition, raw_key, headers in found:
        assert partition == bucket(key_hash(raw_key), 4, 7)
        assert headers[COUNT_HEADER] == b"7"
    assert {p for p, _, _ in found} >= {4, 5, 6}  # the new partitions are used
