"""`splitstate backfill` with Spark: the state it builds equals replaying the stream.

Each app gets 100,000 records over a topic that grew from 4 to 8 partitions mid-history
(records of a key sit in its old partition up to the growth's threshold, later ones in the
partition split from it). The runtime processes the stream as it is written (phase 1 on 4
partitions, then phase 2 on 8); backfill from Kafka and from a Parquet archive of the same
records must then give the same state, key for key, and the same offsets.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from framework.coordination.registry import TopicEntry, TopicRegistry
from framework.kafka import Clients
from rebalance import TopicHistory
from statestore import ProcessorDatabase
from tests.integration.compacted_reads import read_topic
from tests.integration.harness import Supervised, produce, splitstate, unique, write_config

pytestmark = [pytest.mark.integration, pytest.mark.spark]

RECORDS = 100_000
Records = Callable[[random.Random, int], Iterator[tuple[bytes, bytes]]]


def words(rng: random.Random, count: int) -> Iterator[tuple[bytes, bytes]]:
    """Wordcount input: keys from 2,000 words."""
    for _ in range(count):
        yield f"word-{rng.randrange(2000):04d}".encode(), b""


def transactions(rng: random.Random, count: int) -> Iterator[tuple[bytes, bytes]]:
    """Balances input: order matters (overdrafts are refused), plus some invalid records."""
    for _ in range(count):
        account = f"acc-{rng.randrange(500):03d}"
        if rng.random() < 0.01:
            yield account.encode(), b"{not json"
            continue
        kind = "deposit" if rng.random() < 0.55 else "withdrawal"
        body = {"account": account, "kind": kind, "amount": rng.randrange(1, 500)}
        yield account.encode(), json.dumps(body).encode()


@dataclass
class History:
    """An app whose input grew 4 -> 8 mid-history, processed by the runtime to the end."""

    app: str
    config: Path
    topic: str
    app_id: str
    tmp: Path
    bootstrap: str

    def with_state_dir(self, name: str) -> Path:
        """The same app config with its state somewhere else."""
        data = json.loads(json.dumps(_load_yaml(self.config)))
        data["state_dir"] = str(self.tmp / name)
        path = self.tmp / f"{name}.yaml"
        path.write_text(json.dumps(data))
        return path


def _load_yaml(path: Path) -> dict[str, Any]:
    import yaml  # noqa: PLC0415

    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


def grow(bootstrap: str, topic: str, before: int, after: int) -> dict[int, int]:
    """Add partitions and record the growth (history and thresholds) in the registry.

    Every record of phase 1 is flushed before, so each parent's end offset is the threshold
    of the partition split from it (``splitstate expand`` will write marker records).
    """
    client: dict[str, str | int | float | bool] = {"bootstrap.servers": bootstrap}
    admin = AdminClient(client)
    consumer = Consumer({**client, "group.id": unique("watermarks")})
    ends = {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
        for p in range(before)
    }
    consumer.close()
    admin.create_partitions([NewPartitions(topic, after)])[topic].result(30)
    thresholds = {child: ends[child - before] for child in range(before, after)}
    TopicRegistry(Clients(client)).write(
        TopicEntry(TopicHistory.of(topic, [before, after], thresholds))
    )
    return thresholds


def run_until_processed(history: History, phase: str) -> None:
    """Run the app's processors until they committed every input offset, then stop them."""
    client = {"bootstrap.servers": history.bootstrap}
    consumer = Consumer({**client, "group.id": history.app_id, "enable.auto.commit": False})
    partitions = len(
        consumer.list_topics(history.topic, timeout=30).topics[history.topic].partitions
    )
    ends = [
        consumer.get_watermark_offsets(TopicPartition(history.topic, p), timeout=30)[1]
        for p in range(partitions)
    ]
    runner = Supervised(
        history.app, history.config, history.tmp / "state", history.tmp / f"{phase}.log"
    )
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            committed = consumer.committed(
                [TopicPartition(history.topic, p) for p in range(partitions)], timeout=30
            )
            if all(tp.offset >= end for tp, end in zip(committed, ends, strict=True)):
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"{phase}: the runtime did not process every record")
    finally:
        consumer.close()
        assert runner.stop() == 0, runner.output()[-3000:]


def make_history(tmp: Path, bootstrap: str, app: str, records: Records, kind: str) -> History:
    topic, out = unique(f"{kind}-in"), unique(f"{kind}-out")
    app_id = unique(kind)
    config = write_config(
        tmp,
        bootstrap,
        app_id=app_id,
        inputs=[{"topic": topic, "partitions": 4}],
        outputs=[{"topic": out, "partitions": 4}],
        initial_processors=2,
        processors=2,
        batch={"max_records": 5000, "max_wait_ms": 50},
        spark={"shards": 8},
    )
    created = splitstate("topics", "create", app, "--config", str(config))
    assert created.returncode == 0, created.stderr
    history = History(app, config, topic, app_id, tmp, bootstrap)
    rng = random.Random(kind)
    produce(bootstrap, topic, records(rng, RECORDS // 2))
    run_until_processed(history, "phase-1")
    thresholds = grow(bootstrap, topic, 4, 8)
    assert all(offset > 0 for offset in thresholds.values())
    produce(bootstrap, topic, records(rng, RECORDS - RECORDS // 2))
    run_until_processed(history, "phase-2")
    return history


def state_of(state_dir: Path) -> tuple[dict[tuple[str, bytes], Any], dict[Any, int]]:
    """Every processor's state (store, key) -> value, and input offsets, merged."""
    values: dict[tuple[str, bytes], Any] = {}
    offsets: dict[Any, int] = {}
    for path in sorted(state_dir.glob("processor-*")):
        if not path.is_dir():
            continue
        database = ProcessorDatabase.open_read_only(path)
        try:
            for store in database.store_names():
                for key, value in database.items(store):
                    assert (store, key) not in values, f"{key!r} is in two processors"
                    values[(store, key)] = value
            offsets.update(database.offsets())
        finally:
            database.close()
    return values, offsets


def write_archive(history: History, path: Path) -> int:
    """A Parquet archive of the whole input topic, as a lake export would write it."""
    rows: dict[str, list[Any]] = {
        "key": [],
        "value": [],
        "partition": [],
        "offset": [],
        "timestamp": [],
        "headers": [],
    }
    for record in read_topic(history.bootstrap, history.topic, 8):
        rows["key"].append(record.key)
        rows["value"].append(record.value)
        rows["partition"].append(record.partition)
        rows["offset"].append(record.offset)
        rows["timestamp"].append(record.timestamp)
        rows["headers"].append([{"key": k, "value": v} for k, v in record.header_list])
    schema = pa.schema(
        [
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("timestamp", pa.timestamp("ms")),
            ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
        ]
    )
    path.mkdir(parents=True)
    table = pa.Table.from_pydict(rows, schema=schema)
    half = table.num_rows // 2  # two files, as a lake export would write several
    pq.write_table(table.slice(0, half), path / "part-0.parquet")
    pq.write_table(table.slice(half), path / "part-1.parquet")
    return int(table.num_rows)


@pytest.fixture(scope="module", params=["wordcount", "balances"])
def history(
    request: pytest.FixtureRequest,
    kafka_bootstrap: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> History:
    kind = str(request.param)
    tmp = tmp_path_factory.mktemp(kind)
    if kind == "wordcount":
        return make_history(tmp, kafka_bootstrap, "examples.wordcount.app:app", words, kind)
    return make_history(tmp, kafka_bootstrap, "examples.balances.app:app", transactions, kind)


def test_backfill_from_kafka_equals_replay(history: History) -> None:
    replayed, replay_offsets = state_of(history.tmp / "state")
    assert len(replayed) > 400
    config = history.with_state_dir("backfill-kafka")

    refused = splitstate("backfill", history.app, "--config", str(config))
    assert refused.returncode == 2
    assert "has processed records already" in refused.stderr
    assert "--replace" in refused.stderr

    built = splitstate("backfill", history.app, "--config", str(config), "--replace", timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    assert f"{RECORDS} records read" in built.stdout
    # its figures add up: read = applied + dead letters + records without a key (a new user
    # found "records read / applied" counting balances' dead letters as applied)
    figures = re.search(
        r"backfill: (\d+) records read: (\d+) applied, (\d+) dead letters .*?, (\d+) without a key",
        built.stdout,
    )
    assert figures is not None, built.stdout
    read, applied, dead, keyless = map(int, figures.groups())
    assert read == applied + dead + keyless and keyless == 0
    assert (dead > 0) == (history.app == "examples.balances.app:app"), built.stdout
    backfilled, offsets = state_of(history.tmp / "backfill-kafka")
    assert backfilled == replayed
    assert offsets == replay_offsets
    assert sum(offsets.values()) == RECORDS

    again = splitstate("backfill", history.app, "--config", str(config))
    assert again.returncode == 2
    assert "state already exists" in again.stderr


def test_backfill_from_parquet_equals_replay(history: History) -> None:
    replayed, replay_offsets = state_of(history.tmp / "state")
    archive = history.tmp / "archive"
    assert write_archive(history, archive) == RECORDS
    config = history.with_state_dir("backfill-parquet")
    built = splitstate(
        "backfill",
        history.app,
        "--config",
        str(config),
        "--source",
        "parquet",
        str(archive),
        "--replace",
        timeout=600,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    backfilled, offsets = state_of(history.tmp / "backfill-parquet")
    assert backfilled == replayed
    assert offsets == replay_offsets
