"""examples/orders on the real broker (``tests/integration/apps/orders.py``): every order is
enriched with its customer exactly as of its time in the canonical order of what the two
topics hold (forced ticks included), each once under exactly-once through a SIGKILL and the
restart; a customer's change written after a later order (and read after it) is still the one
that order reads."""

from __future__ import annotations

import os
import signal
import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

import orjson
import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from framework.config import ConfigError
from framework.coordination.layout import prepare_app
from framework.kafka import Clients
from framework.loader import load_app
from framework.order import NO_FLOOR, Item, canonical_order
from framework.producer import SplitstateProducer
from framework.tables import Versions
from framework.time.ticks import TICK_HEADER, TickRead, read_tick
from tests.integration.compacted_reads import Read, read_topic
from tests.integration.harness import Supervised, create_app, unique, wait_for

pytestmark = pytest.mark.integration

APP = "tests.integration.apps.orders:app"
PARTITIONS = 2
KEYS = [f"cust-{i}".encode() for i in range(6)]
HISTORY = timedelta(days=7) // timedelta(milliseconds=1)


def _produce(bootstrap: str, topic: str, records: list[tuple[bytes, dict[str, object]]]) -> None:
    producer = SplitstateProducer({"bootstrap.servers": bootstrap}, [topic])
    for key, value in records:
        producer.produce(topic, key, orjson.dumps(value))
    assert producer.close(60) == 0


def _expected(
    customers: list[Read], orders: list[Read], app_id: str
) -> dict[bytes, list[dict[str, object]]]:
    """Each key's enriched orders, in the canonical order of what the topics hold: the
    customers' versions applied before each order that follows them there."""
    items: list[Item[Read]] = []
    for index, records in enumerate((customers, orders)):
        marks: dict[int, int] = defaultdict(lambda: NO_FLOOR)
        for read in sorted(records, key=lambda r: (r.partition, r.offset)):
            at: int | None = None
            if TICK_HEADER in read.headers:
                tick = read_tick([(TICK_HEADER, read.headers[TICK_HEADER])])
                if isinstance(tick, TickRead) and tick.applies_to(app_id):
                    at = tick.floor
            elif read.key is not None and read.value:
                at = int(orjson.loads(read.value)["at"])
            if at is not None:
                marks[read.partition] = max(marks[read.partition], at)
            items.append(Item((str(index), read.partition), read.offset, read.key, at,
                              marks[read.partition], index, 0, read))  # fmt: skip
    tables: dict[bytes, Versions] = defaultdict(Versions)
    enriched: dict[bytes, list[dict[str, object]]] = defaultdict(list)
    for item in canonical_order(items):
        read, key = item.payload, item.key
        if key is None or not read.value or TICK_HEADER in read.headers:
            continue
        value = orjson.loads(read.value)
        if item.input == 0:
            tables[key].upsert(value["at"], read.value, HISTORY)
            continue
        found = tables[key].at(value["at"], HISTORY)
        customer = None if found is None else orjson.loads(found)
        enriched[key].append(
            {
                "order_id": value["order_id"],
                "amount": float(value["amount"]),
                "customer": key.decode(),
                "name": customer["name"] if customer else None,
                "region": customer["region"] if customer else None,
            }
        )
    return dict(enriched)


def test_orders_read_their_customer_as_of_their_time_on_the_broker(
    tmp_path: Path, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = unique("tables") + "-"
    monkeypatch.setenv("ORDERS_TOPIC_PREFIX", prefix)  # (the app's topics, in every process)
    customers, orders, out = f"{prefix}customers", f"{prefix}orders", f"{prefix}enriched"
    app_id = f"{prefix}app"
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
        app_id=app_id,
        inputs=[
            {"topic": customers, "partitions": PARTITIONS},
            {"topic": orders, "partitions": PARTITIONS},
        ],
        outputs=[{"topic": out, "partitions": PARTITIONS}],
        initial_processors=1,
        processing_guarantee="exactly-once",
        batch={"max_records": 20, "max_wait_ms": 50, "in_flight": 2},
        time={"input_order": "canonical", "max_input_wait": 5},
        snapshots={"enabled": False},
        bootstrap="replay",
    )
    # each customer's versions at 1000, 3000, 5000 (regions r0, r1, r2); orders between them
    _produce(
        kafka_bootstrap,
        customers,
        [
            (key, {"name": key.decode(), "region": f"r{v}", "at": 1000 + 2000 * v})
            for v in range(3)
            for key in KEYS
        ],
    )
    _produce(
        kafka_bootstrap,
        orders,
        [
            (key, {"order_id": f"{key.decode()}-{n}", "amount": n, "at": 500 + 1000 * n})
            for n in range(6)
            for key in KEYS
        ],
    )
    runner = Supervised(APP, config, tmp_path / "state", tmp_path / "log")
    try:
        wait_for(lambda: 0 in runner.pids(), 60, "the processor to start")
        early = 5 * len(KEYS)  # (orders up to 4500 need no later customer record)
        wait_for(lambda: len(read_topic(kafka_bootstrap, out, PARTITIONS)) >= early, 120, "outputs")
        os.kill(runner.pids()[0], signal.SIGKILL)  # (its state and the merge rebuilt)
        first = runner.pids().get(0)
        wait_for(lambda: runner.pids().get(0) not in (None, first), 60, "the restart")
        time.sleep(3)  # (the restarted processor reads its inputs again)
        # an order at 20000, then (read after it) its customer's change at 15000
        _produce(kafka_bootstrap, orders, [(KEYS[0], {"order_id": "late-read", "amount": 1,
                                                      "at": 20_000})])  # fmt: skip
        time.sleep(1)  # (well within max_input_wait: the order waits for the customers)
        _produce(kafka_bootstrap, customers, [(KEYS[0], {"name": "moved", "region": "east",
                                                         "at": 15_000})])  # fmt: skip
        total = 6 * len(KEYS) + 1
        wait_for(
            lambda: len(read_topic(kafka_bootstrap, out, PARTITIONS)) >= total, 120, "every output"
        )
        time.sleep(2)  # (nothing more may come: each once)
    finally:
        assert runner.stop() == 0, runner.output()[-3000:]
    emitted: dict[bytes, list[dict[str, object]]] = defaultdict(list)
    for read in sorted(
        read_topic(kafka_bootstrap, out, PARTITIONS), key=lambda r: (r.partition, r.offset)
    ):
        assert read.key is not None and read.value is not None
        emitted[read.key].append(orjson.loads(read.value))
    expected = _expected(
        read_topic(kafka_bootstrap, customers, PARTITIONS),
        read_topic(kafka_bootstrap, orders, PARTITIONS),
        app_id,
    )
    assert dict(emitted) == expected
    assert emitted[KEYS[0]][-1]["order_id"] == "late-read"
    assert emitted[KEYS[0]][-1]["region"] == "east"  # (not forced past: read the change)
    assert [o["region"] for o in emitted[KEYS[1]]] == [None, "r0", "r0", "r1", "r1", "r2"]


def test_topics_create_compacts_a_table_topic_only_as_a_rebuild_allows_and_a_start_checks(
    tmp_path: Path, kafka_bootstrap: str, kafka_admin: AdminClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the stream kept a day, `topics create` makes the table's topic compacted with
    ``min.compaction.lag.ms`` = history + a day (``framework.tables.topics``); lowered, a
    start refuses it, naming the least lag."""
    prefix = unique("tabletopic") + "-"
    monkeypatch.setenv("ORDERS_TOPIC_PREFIX", prefix)
    customers, orders = f"{prefix}customers", f"{prefix}orders"
    day = 86_400_000
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
        app_id=f"{prefix}app",
        inputs=[{"topic": customers}, {"topic": orders, "retention_ms": day}],
        outputs=[{"topic": f"{prefix}enriched"}],
        initial_processors=1,
        time={"input_order": "canonical"},
        snapshots={"enabled": False},
        bootstrap="replay",
    )
    resource = ConfigResource(ResourceType.TOPIC, customers)
    described = kafka_admin.describe_configs([resource])[resource].result(timeout=30)
    assert described["cleanup.policy"].value == "compact"
    assert described["min.compaction.lag.ms"].value == str(HISTORY + day)
    app = load_app(APP, config)
    prepare_app(app, Clients.of(app.config))  # (as made: accepted)
    lowered = ConfigResource(
        ResourceType.TOPIC,
        customers,
        incremental_configs=[
            ConfigEntry("min.compaction.lag.ms", "0", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    kafka_admin.incremental_alter_configs([lowered])[lowered].result(timeout=30)
    with pytest.raises(ConfigError, match=f"at least {HISTORY + day}"):
        prepare_app(app, Clients.of(app.config))
