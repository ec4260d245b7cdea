"""``splitstate backfill`` over a history holding a record that kills the process running the
function (``os._exit``): the build skips it as the processors' crash guards would (after
``crash_limit`` deaths, from the app's config) and every other record's state is exact; with
``on_error: stop`` it builds nothing and names the record and the fix."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from rebalance import bucket, key_hash
from statestore import ProcessorDatabase
from tests.framework.killer_app import PARTITIONS
from tests.integration.harness import produce, splitstate, unique, write_config

pytestmark = [pytest.mark.integration, pytest.mark.spark]

APP = "tests.framework.killer_app:app"


def test_backfill_skips_a_killer_record_or_stops_on_it(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    topic = unique("killing")
    rng = random.Random(5)
    records: list[tuple[bytes, bytes]] = [
        (f"k{rng.randrange(20):02d}".encode(), str(rng.randrange(100)).encode()) for _ in range(300)
    ]
    killer_key = records[150][0]
    records.insert(150, (killer_key, f"die:{tmp_path / 'deaths'}".encode()))

    def config(name: str, on_error: str) -> Path:
        directory = tmp_path / name
        directory.mkdir()
        return write_config(
            directory,
            kafka_bootstrap,
            app_id=unique(name),
            inputs=[{"topic": topic, "partitions": PARTITIONS}],
            outputs=[],
            initial_processors=2,
            processors=2,
            on_error=on_error,
            crash_limit=2,
            spark={"shards": 2},
        )

    skipping = config("skipping", "dead-letter")
    created = splitstate("topics", "create", APP, "--config", str(skipping))
    assert created.returncode == 0, created.stderr
    produce(kafka_bootstrap, topic, records)
    partition = bucket(key_hash(killer_key), 2, PARTITIONS)
    offset = sum(1 for key, _ in records[:150] if bucket(key_hash(key), 2, PARTITIONS) == partition)
    where = f"{topic}[{partition}]@{offset}"

    done = splitstate("backfill", APP, "--config", str(skipping), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"skipped {where}: it killed the Spark fold's process 2 times" in done.stdout
    expected: dict[bytes, dict[str, int]] = {}
    for key, value in records:
        if not value.startswith(b"die:"):
            held = expected.setdefault(key, {"n": 0, "sum": 0})
            held["n"] += 1
            held["sum"] += int(value)
    found: dict[bytes, dict[str, int]] = {}
    for j in (0, 1):
        path = tmp_path / "skipping" / "state" / f"processor-{j}"
        with ProcessorDatabase.open_read_only(path) as database:
            for key in expected:
                if database.get("counts", key) is not None:
                    found[key] = database.get("counts", key)
    assert found == expected

    stopping = config("stopping", "stop")
    stopped = splitstate("backfill", APP, "--config", str(stopping), timeout=600)
    assert stopped.returncode != 0
    assert f"{where} (key {killer_key!r}) killed the Spark fold's process 2 times" in (
        stopped.stderr
    ), stopped.stderr[-3000:]
    assert "on_error: dead-letter" in stopped.stderr
    assert not any((tmp_path / "stopping" / "state").glob("processor-*"))
