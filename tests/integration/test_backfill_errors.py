"""`splitstate backfill` on a first deployment: continuing from --until, and every refusal.

A wordcount topic with history but no app run yet: backfill up to chosen offsets, then the
processors emit counts for the later records only, continuing from the backfilled counts.
Bad requests are refused with the problem and the fix, and build nothing.
"""

from __future__ import annotations

import os
import random
import shutil
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from framework.coordination.scaling import read_control
from framework.loader import load_app
from rebalance import bucket, key_hash
from tests.integration.harness import (
    Supervised,
    TopicReader,
    counts_by_word,
    produce,
    splitstate,
    unique,
    write_config,
)

pytestmark = pytest.mark.integration

APP = "examples.wordcount.app:app"
PARTITIONS = 4


class Deployment:
    """A wordcount config over a topic that already holds 4,000 words."""

    def __init__(self, tmp: Path, kafka: str) -> None:
        self.tmp, self.kafka = tmp, kafka
        self.topic, self.out = unique("history"), unique("counts")
        self.config = write_config(
            tmp,
            kafka,
            app_id=unique("first"),
            inputs=[{"topic": self.topic, "partitions": PARTITIONS}],
            outputs=[{"topic": self.out, "partitions": PARTITIONS}],
            initial_processors=2,
            processors=2,
            spark={"shards": 4},
        )
        created = splitstate("topics", "create", APP, "--config", str(self.config))
        assert created.returncode == 0, created.stderr
        rng = random.Random(3)
        self.words = [f"w{rng.randrange(60):02d}" for _ in range(4000)]
        produce(kafka, self.topic, ((w.encode(), b"") for w in self.words))
        consumer = Consumer({"bootstrap.servers": kafka, "group.id": unique("ends")})
        self.ends = {
            p: consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=30)[1]
            for p in range(PARTITIONS)
        }
        consumer.close()

    def backfill(self, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
        command = ["backfill", APP, "--config", str(self.config), *args]
        if env is None:
            done = splitstate(*command, timeout=600)
        else:
            import subprocess  # noqa: PLC0415
            import sys  # noqa: PLC0415

            done = subprocess.run(
                [sys.executable, "-m", "framework.ops.cli", *command],
                capture_output=True,
                text=True,
                timeout=600,
                env=env,
                check=False,
            )
        return done.returncode, done.stdout, done.stderr


@pytest.fixture
def deployment(tmp_path: Path, kafka_bootstrap: str) -> Deployment:
    return Deployment(tmp_path, kafka_bootstrap)


@pytest.mark.spark
def test_processors_continue_from_the_backfilled_offsets(deployment: Deployment) -> None:
    until = {p: end // 2 for p, end in deployment.ends.items()}
    spec = ",".join(f"{deployment.topic}:{p}={o}" for p, o in until.items())
    status, out, err = deployment.backfill("--until", spec)
    assert status == 0, err[-3000:]
    assert f"{sum(until.values())} records read" in out

    # Which words the backfill covered: those at offsets below --until in their partition.
    seen_per_partition: Counter[int] = Counter()
    covered: Counter[str] = Counter()
    for word in deployment.words:
        partition = bucket(key_hash(word.encode()), PARTITIONS, PARTITIONS)
        if seen_per_partition[partition] < until[partition]:
            covered[word] += 1
        seen_per_partition[partition] += 1
    total = Counter(deployment.words)

    runner = Supervised(
        APP, deployment.config, deployment.tmp / "state", deployment.tmp / "run.log"
    )
    reader = TopicReader(deployment.kafka, deployment.out, PARTITIONS)
    try:
        expected_outputs = len(deployment.words) - sum(until.values())
        reader.wait_for(
            lambda r: len(r.records) >= expected_outputs, timeout=120, what="the later records"
        )
        reader.poll(2.0)
    finally:
        assert runner.stop() == 0, runner.output()[-3000:]
        reader.close()
    seen = counts_by_word(reader.records)
    for word, n in total.items():
        assert seen.get(word, []) == list(range(covered[word] + 1, n + 1)), word


@pytest.mark.spark  # the archive's columns are read with Spark
def test_bad_requests_are_refused_with_the_fix(deployment: Deployment, tmp_path: Path) -> None:
    topic = deployment.topic
    past = ",".join(f"{topic}:{p}={end + 5}" for p, end in deployment.ends.items())
    status, _, err = deployment.backfill("--until", past)
    assert status == 2
    assert f"{topic}[0]: asked up to offset {deployment.ends[0] + 5}" in err
    assert f"ends at {deployment.ends[0]}" in err

    status, _, err = deployment.backfill("--until", f"{topic}:0=1")
    assert status == 2
    assert f"--until leaves out {topic}[1]" in err

    status, _, err = deployment.backfill("--source", "hdfs")
    assert status == 2
    assert "--source kafka, or --source parquet PATH" in err

    # the failed attempts recorded the app with 2 processors: a different count is refused
    assert read_control(load_app(APP, deployment.config)).processors == 2
    status, _, err = deployment.backfill("--processors", "3")
    assert status == 2
    assert "runs 2 processors (its control log), not 3" in err
    assert "splitstate scale" in err

    archive = tmp_path / "bad-archive"
    archive.mkdir()
    table = pa.table({"key": pa.array([1, 2]), "value": pa.array([b"a", b"b"])})
    pq.write_table(table, archive / "part-0.parquet")
    status, _, err = deployment.backfill("--source", "parquet", str(archive))
    assert status == 2, err[-2000:]
    assert "column 'key' is bigint, expected binary or string" in err
    assert "column 'partition' is missing" in err
    assert "column 'offset' is missing" in err

    no_java = tmp_path / "bin-without-java"
    no_java.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"} | {"PATH": str(no_java)}
    status, _, err = deployment.backfill(env=env)
    assert status == 2
    assert "Java was not found" in err
    assert "Fix: install Java 17" in err

    java_only = tmp_path / "bin-with-java-only"
    java_only.mkdir()
    java = shutil.which("java")
    assert java is not None
    (java_only / "java").symlink_to(Path(java).resolve())
    env = os.environ | {"PATH": str(java_only), "SPLITSTATE_CACHE_DIR": str(tmp_path / "empty")}
    status, _, err = deployment.backfill(env=env)
    assert status == 2
    assert "Spark's Kafka connector" in err
    assert "Fix: install Maven" in err

    assert not any((deployment.tmp / "state").glob("processor-*/CURRENT"))  # nothing built


def test_history_lost_to_retention_is_refused(deployment: Deployment) -> None:
    admin = AdminClient({"bootstrap.servers": deployment.kafka})
    futures = admin.delete_records([TopicPartition(deployment.topic, 1, 10)])
    for future in futures.values():
        future.result(30)
    deadline = time.monotonic() + 30
    consumer = Consumer({"bootstrap.servers": deployment.kafka, "group.id": unique("low")})
    while consumer.get_watermark_offsets(TopicPartition(deployment.topic, 1))[0] < 10:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    consumer.close()
    status, _, err = deployment.backfill()
    assert status == 2
    assert (
        f"{deployment.topic}[1]: needs offsets from 0, but Kafka retains only "
        f"10..{deployment.ends[1]}"
    ) in err
    assert "--source parquet" in err
