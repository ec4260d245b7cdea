"""``time.input_order: canonical`` on the real broker: a two-input app applies each key's
records in their canonical order (``framework.order``), through a SIGKILL and the restart,
and emits each once (exactly-once); the order equals ``canonical_order`` of what the input
topics hold (the processor's forced ticks included)."""

from __future__ import annotations

import os
import signal
import time
from collections import defaultdict
from pathlib import Path

import orjson
import pytest

from framework.order import NO_FLOOR, Item, canonical_order
from framework.producer import SplitstateProducer
from framework.time.ticks import TICK_HEADER, TickRead, read_tick
from tests.integration.compacted_reads import Read, read_topic
from tests.integration.harness import Supervised, create_app, unique, wait_for

pytestmark = pytest.mark.integration

PARTITIONS = 2
KEYS = [f"user-{i}".encode() for i in range(6)]
PER_KEY = 40  # records per key and input


def _produce(bootstrap: str, topic: str, key_times: dict[bytes, list[int]]) -> None:
    """Each key's records with event times ``key_times[key]``, placed by linear hashing."""
    producer = SplitstateProducer({"bootstrap.servers": bootstrap}, [topic])
    for key, times in key_times.items():
        for at in times:
            producer.produce(topic, key, orjson.dumps({"at": at}))
    assert producer.close(60) == 0


def _canonical(records: dict[str, list[Read]], app_id: str) -> dict[bytes, list[str]]:
    """Each key's ``topic@partition@offset`` in the canonical order of ``records``."""
    items: list[Item[str]] = []
    for index, topic in enumerate(records):
        marks: dict[int, int] = defaultdict(lambda: NO_FLOOR)
        for read in sorted(records[topic], key=lambda r: (r.partition, r.offset)):
            time_: int | None = None
            if TICK_HEADER in read.headers:
                tick = read_tick([(TICK_HEADER, read.headers[TICK_HEADER])])
                if isinstance(tick, TickRead) and tick.applies_to(app_id):
                    time_ = tick.floor
            elif read.key is not None and read.value:
                time_ = int(orjson.loads(read.value)["at"])
            if time_ is not None:
                marks[read.partition] = max(marks[read.partition], time_)
            where = f"{topic}@{read.partition}@{read.offset}"
            item = Item((topic, read.partition), read.offset, read.key, time_,
                        marks[read.partition], index, 0, where)  # fmt: skip
            items.append(item)
    by_key: dict[bytes, list[str]] = defaultdict(list)
    for item in canonical_order(items):
        if item.key is not None:
            by_key[item.key].append(item.payload)
    return dict(by_key)


def test_a_two_input_app_applies_the_canonical_order_through_a_sigkill(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    app_id = unique("two-inputs")
    clicks, views, out = f"{app_id}-clicks", f"{app_id}-views", f"{app_id}-out"
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        "tests.integration.apps.two_inputs:app",
        app_id=app_id,
        inputs=[
            {"topic": clicks, "partitions": PARTITIONS},
            {"topic": views, "partitions": PARTITIONS},
        ],
        outputs=[{"topic": out, "partitions": PARTITIONS}],
        initial_processors=1,
        processing_guarantee="exactly-once",
        batch={"max_records": 50, "max_wait_ms": 50, "in_flight": 2},
        time={"input_order": "canonical", "max_input_wait": 0.5},
        snapshots={"enabled": False},
        bootstrap="replay",
    )
    # clicks at even times, views at odd ones: all clicks are written (and fetched) first
    _produce(kafka_bootstrap, clicks, {k: [2 * i for i in range(PER_KEY)] for k in KEYS})
    runner = Supervised(
        "tests.integration.apps.two_inputs:app", config, tmp_path / "state", tmp_path / "log"
    )
    try:
        wait_for(lambda: 0 in runner.pids(), 60, "the processor to start")
        time.sleep(2)  # it applies what it may of the clicks (most wait for views)
        _produce(kafka_bootstrap, views, {k: [2 * i + 1 for i in range(PER_KEY)] for k in KEYS})
        total = 2 * PER_KEY * len(KEYS)
        wait_for(
            lambda: len(read_topic(kafka_bootstrap, out, PARTITIONS)) >= total // 3,
            120,
            "a third of the outputs",
        )
        os.kill(runner.pids()[0], signal.SIGKILL)
        first = runner.pids().get(0)
        wait_for(lambda: runner.pids().get(0) not in (None, first), 60, "the restart")
        wait_for(
            lambda: len(read_topic(kafka_bootstrap, out, PARTITIONS)) >= total,
            180,
            "every output",
        )
        time.sleep(2)  # (nothing more may come: each once)
    finally:
        assert runner.stop() == 0, runner.output()[-3000:]
    emitted: dict[bytes, list[str]] = defaultdict(list)
    for read in sorted(
        read_topic(kafka_bootstrap, out, PARTITIONS), key=lambda r: (r.partition, r.offset)
    ):
        assert read.key is not None and read.value is not None
        emitted[read.key].append(read.value.decode())
    inputs = {t: read_topic(kafka_bootstrap, t, PARTITIONS) for t in (clicks, views)}
    expected = _canonical(inputs, app_id)
    assert sorted(emitted) == sorted(KEYS)
    for key in KEYS:
        assert emitted[key] == expected[key], key
        assert len(emitted[key]) == 2 * PER_KEY
