"""examples/revenue on the real broker (``tests/integration/apps/revenue.py``): orders keyed
by customer are re-keyed by region through the app's internal topic (created by
``splitstate topics create``, placed by linear hashing, written in each batch's transaction)
and summed per region and hour; through a SIGKILL and the restart, each region's hours are
emitted once, exactly as an oracle (``TestDriver``) computes from what the internal topic
holds (its records and the processor's ticks, in their order), and every order reached the
internal topic once."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest

from framework import AppConfig, TestDriver
from framework.producer import SplitstateProducer
from framework.repartition import EVENT_TIME_HEADER
from framework.time.ticks import TICK_HEADER, TickRead, read_tick
from tests.integration.compacted_reads import Read, read_topic
from tests.integration.harness import Supervised, create_app, unique, wait_for

pytestmark = pytest.mark.integration

APP = "tests.integration.apps.revenue:app"
PARTITIONS = 2
HOUR = 3_600_000
CUSTOMERS = [f"customer-{i}".encode() for i in range(6)]
REGIONS = ["eu", "us", "apac"]


def _produce(bootstrap: str, topic: str, orders: list[tuple[bytes, dict[str, object]]]) -> None:
    producer = SplitstateProducer({"bootstrap.servers": bootstrap}, [topic])
    for key, value in orders:
        producer.produce(topic, key, orjson.dumps(value))
    assert producer.close(60) == 0


def _orders(first: int, count: int) -> list[tuple[bytes, dict[str, object]]]:
    """Orders ``first..first+count-1``, one a minute, each customer's in turn."""
    return [
        (
            CUSTOMERS[n % len(CUSTOMERS)],
            {"region": REGIONS[n % len(REGIONS)], "amount": n + 1, "at": n * 60_000},
        )
        for n in range(first, first + count)
    ]


def _oracle(config: AppConfig, internal: str, reads: list[Read]) -> TestDriver:
    """The next stage applied to the internal topic as it is: each partition's records and
    this app's ticks, in offset order."""
    from tests.integration.apps.revenue import app  # noqa: PLC0415 - needs the test's env

    driver = TestDriver(app, config)
    for read in sorted(reads, key=lambda r: (r.partition, r.offset)):
        if TICK_HEADER in read.headers:
            tick = read_tick([(TICK_HEADER, read.headers[TICK_HEADER])])
            if isinstance(tick, TickRead) and tick.applies_to(config.app_id):
                driver.tick(internal, read.partition, tick.floor, tick.wall)
            continue
        assert read.key is not None
        driver.send(internal, read.key, read.value, read.header_list, read.timestamp,
                    partition=read.partition)  # fmt: skip
    return driver


def test_revenue_per_region_hour_through_the_internal_topic_and_a_restart(
    tmp_path: Path, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = unique("repart") + "-"
    app_id = f"{prefix}app"
    monkeypatch.setenv("REVENUE_TOPIC_PREFIX", prefix)  # (in every process of the app)
    monkeypatch.setenv("REVENUE_APP_ID", app_id)
    orders, out = f"{prefix}orders", f"{prefix}hours"
    internal = f"{app_id}-repartition-by-region"
    config_file = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
        app_id=app_id,
        inputs=[
            {"topic": orders, "partitions": PARTITIONS},
            {"topic": internal, "partitions": PARTITIONS},
        ],
        outputs=[{"topic": out, "partitions": PARTITIONS}],
        initial_processors=1,
        processing_guarantee="exactly-once",
        batch={"max_records": 10, "max_wait_ms": 50, "in_flight": 2},
        snapshots={"enabled": False},
        bootstrap="replay",
    )
    _produce(kafka_bootstrap, orders, _orders(0, 150))  # 2.5 hours
    runner = Supervised(APP, config_file, tmp_path / "state", tmp_path / "log")
    try:
        wait_for(lambda: 0 in runner.pids(), 60, "the processor to start")
        wait_for(lambda: len(read_topic(kafka_bootstrap, internal, PARTITIONS)) >= 40, 120,
                 "re-keyed orders")  # fmt: skip
        os.kill(runner.pids()[0], signal.SIGKILL)
        first = runner.pids().get(0)
        wait_for(lambda: runner.pids().get(0) not in (None, first), 60, "the restart")
        _produce(kafka_bootstrap, orders, _orders(150, 150))  # to 5 hours: 0..3 close

        def all_rekeyed() -> bool:
            reads = read_topic(kafka_bootstrap, internal, PARTITIONS)
            return sum(1 for r in reads if EVENT_TIME_HEADER in r.headers) >= 300

        wait_for(all_rekeyed, 180, "every order re-keyed")
        wait_for(lambda: len(read_topic(kafka_bootstrap, out, PARTITIONS)) >= 12, 120,
                 "hours 0..3 of each region")  # fmt: skip
        time.sleep(2)  # (nothing more may come: each once)
    finally:
        assert runner.stop() == 0, runner.output()[-3000:]
    reads = read_topic(kafka_bootstrap, internal, PARTITIONS)
    rekeyed = [r for r in reads if EVENT_TIME_HEADER in r.headers]
    # every order reached the internal topic once, keyed by its region, on its partition
    seen = Counter(orjson.loads(r.value or b"")["amount"] for r in rekeyed)
    assert seen == Counter(range(1, 301))
    for read in rekeyed:
        assert read.key == orjson.loads(read.value or b"")["region"].encode()
    config = AppConfig.load(config_file)
    oracle = _oracle(config, internal, reads)
    emitted = sorted((r.key, r.value) for r in read_topic(kafka_bootstrap, out, PARTITIONS))
    assert emitted == sorted((o.key, o.value) for o in oracle.outputs(out))
    assert len(emitted) == len(set(emitted)), "each hour once"
    hours = {(key, orjson.loads(value or b"")["start"]) for key, value in emitted}
    assert {(region.encode(), h * HOUR) for region in REGIONS for h in range(4)} <= hours
