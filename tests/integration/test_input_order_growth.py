"""``time.input_order: canonical`` through a growth on the real broker: a growth child's
records take its parent's mark at the marker as their base (``framework.runtime.growth_bases``),
the processor records that base in the control log, and each key's records are applied in
the canonical order of what the input topics hold (ticks and the child's base included)."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

import orjson
import pytest

from framework.coordination.control_log import ControlLog
from framework.coordination.registry import TopicRegistry
from framework.kafka import Clients
from framework.order import NO_FLOOR, Item, canonical_order
from framework.producer import SplitstateProducer
from framework.time.ticks import TICK_HEADER, TickRead, read_tick
from rebalance import Grow, TopicHistory, parent
from tests.integration.compacted_reads import Read, read_topic
from tests.integration.harness import Supervised, create_app, splitstate, unique, wait_for

pytestmark = pytest.mark.integration

APP = "tests.integration.apps.two_inputs:app"
KEYS = [f"user-{i}".encode() for i in range(8)]
PER_KEY = 5
LEASE = {"producer_lease_ms": 4000, "producer_delivery_timeout_ms": 3000}


def _produce(bootstrap: str, topic: str, key_times: dict[bytes, list[int]]) -> None:
    producer = SplitstateProducer({"bootstrap.servers": bootstrap}, [topic])
    for key, times in key_times.items():
        for at in times:
            producer.produce(topic, key, orjson.dumps({"at": at}))
    assert producer.close(60) == 0


def _time_of(read: Read, app_id: str) -> int | None:
    if TICK_HEADER in read.headers:
        tick = read_tick([(TICK_HEADER, read.headers[TICK_HEADER])])
        return tick.floor if isinstance(tick, TickRead) and tick.applies_to(app_id) else None
    if read.key is not None and read.value and "splitstate.marker" not in read.headers:
        return int(orjson.loads(read.value)["at"])
    return None


def _canonical(
    records: dict[str, list[Read]], histories: dict[str, TopicHistory], app_id: str
) -> tuple[dict[bytes, list[str]], dict[int, int]]:
    """Each key's ``topic@partition@offset`` in the canonical order of ``records`` (a growth
    child's marks from its base: its parent's mark at its recorded marker), and the bases."""
    items: list[Item[str]] = []
    bases: dict[int, int] = {}
    for index, topic in enumerate(records):
        history = histories[topic]
        starts: dict[int, tuple[int, int, int]] = {}  # child -> (start, parent, marker)
        for step in history.steps:
            if isinstance(step, Grow):
                for child, start in step.starts.items():
                    source = parent(child, history.initial_partitions)
                    assert source is not None
                    starts[child] = (start, source, step.markers[child])
        marks_at: dict[tuple[int, int], int] = {}
        by_partition: dict[int, list[Read]] = defaultdict(list)
        for read in records[topic]:
            by_partition[read.partition].append(read)
        for partition in sorted(by_partition):
            mark = NO_FLOOR
            if partition in starts:
                _start, source, marker = starts[partition]
                mark = bases[partition] = marks_at[(source, marker)]
            for read in sorted(by_partition[partition], key=lambda r: r.offset):
                at = _time_of(read, app_id)
                mark = mark if at is None else max(mark, at)
                marks_at[(partition, read.offset)] = mark
                rank = history.rank(partition, read.offset)
                where = f"{topic}@{read.partition}@{read.offset}"
                item = Item((topic, partition), read.offset, read.key, at, mark, index, rank, where)
                items.append(item)
    by_key: dict[bytes, list[str]] = defaultdict(list)
    for item in canonical_order(items):
        if item.key is not None:
            by_key[item.key].append(item.payload)
    return dict(by_key), bases


def test_a_growth_childs_records_are_applied_from_its_recorded_base(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    """clicks (1 partition) at 1000 ms and later, then grown to 2; then clicks at 10 ms and
    views at 500 ms. A click of a key in clicks[1] (the child) has the mark of its base
    (clicks[0]'s mark at the marker, >= 1000), so its view goes first; from NO_FLOOR it
    would go first itself."""
    app_id = unique("grown-inputs")
    clicks, views, out = f"{app_id}-clicks", f"{app_id}-views", f"{app_id}-out"
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
        app_id=app_id,
        inputs=[
            {"topic": clicks, "partitions": 1, **LEASE},
            {"topic": views, "partitions": 1, **LEASE},
        ],
        outputs=[{"topic": out, "partitions": 1}],
        initial_processors=1,
        processing_guarantee="exactly-once",
        batch={"max_records": 50, "max_wait_ms": 50, "in_flight": 2},
        time={"input_order": "canonical", "max_input_wait": 0.5},
        snapshots={"enabled": False},
        bootstrap="replay",
    )
    _produce(kafka_bootstrap, clicks, {k: [1000 + i for i in range(PER_KEY)] for k in KEYS})
    runner = Supervised(APP, config, tmp_path / "state", tmp_path / "log")
    try:
        wait_for(lambda: 0 in runner.pids(), 60, "the processor to start")
        total = PER_KEY * len(KEYS)
        wait_for(lambda: len(read_topic(kafka_bootstrap, out, 1)) >= total, 120, "the clicks")
        grown = splitstate(
            "expand", APP, "--config", str(config), "--topic", clicks, "--partitions", "2",
            timeout=180,
        )  # fmt: skip
        assert grown.returncode == 0, grown.stderr
        _produce(kafka_bootstrap, clicks, {k: [10 + i for i in range(PER_KEY)] for k in KEYS})
        _produce(kafka_bootstrap, views, {k: [500 + i for i in range(PER_KEY)] for k in KEYS})
        wait_for(lambda: len(read_topic(kafka_bootstrap, out, 1)) >= 3 * total, 180, "every output")
        time.sleep(2)  # (nothing more may come: each once)
    finally:
        assert runner.stop() == 0, runner.output()[-3000:]
    emitted: dict[bytes, list[str]] = defaultdict(list)
    for read in sorted(read_topic(kafka_bootstrap, out, 1), key=lambda r: r.offset):
        assert read.key is not None and read.value is not None
        emitted[read.key].append(read.value.decode())
    entries = TopicRegistry(Clients({"bootstrap.servers": kafka_bootstrap})).read()
    histories = {topic: entries[topic].history for topic in (clicks, views)}
    inputs = {
        clicks: read_topic(kafka_bootstrap, clicks, 2),
        views: read_topic(kafka_bootstrap, views, 1),
    }
    expected, bases = _canonical(inputs, histories, app_id)
    assert bases[1] >= 1000
    assert any(f"{clicks}@1@" in where for wheres in expected.values() for where in wheres)
    for key in KEYS:
        assert emitted[key] == expected[key], key
    control = ControlLog(
        Clients({"bootstrap.servers": kafka_bootstrap}), f"{app_id}-splitstate-control"
    )
    start = histories[clicks].steps[0].starts[1]  # type: ignore[union-attr]
    assert control.read().growth_bases == {(clicks, 1, start): bases[1]}
