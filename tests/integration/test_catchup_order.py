"""A canonical two-input app scaled 1 -> 2 on the real broker with ``bootstrap: replay``: the
receiver rebuilds the keys it gains in their canonical order (``framework.runtime.
catchup_order``), so each key's state, which its last output shows, is the canonical order of
all its records, across the owner that applied them before the scale and the receiver after
it."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest

from framework.producer import SplitstateProducer
from tests.integration.compacted_reads import read_topic
from tests.integration.harness import Supervised, create_app, unique, wait_for
from tests.integration.test_input_order import _canonical
from tests.integration.test_scaling import scale_to, wait_for_generation

pytestmark = pytest.mark.integration

APP = "tests.integration.apps.two_inputs_state:app"
PARTITIONS = 2
KEYS = [f"user-{i}".encode() for i in range(6)]
PER_ROUND = 20  # records per key, input and round


def _produce(bootstrap: str, topic: str, times: list[int]) -> None:
    """Each key's records with event times ``times``, placed by linear hashing."""
    producer = SplitstateProducer({"bootstrap.servers": bootstrap}, [topic])
    for key in KEYS:
        for at in times:
            producer.produce(topic, key, orjson.dumps({"at": at}))
    assert producer.close(60) == 0


def _round(bootstrap: str, clicks: str, views: str, first: int) -> None:
    """A round of records: every click (even times) written before every view (odd ones), so
    applied topic by topic or as fetched, a key's order is not the canonical one."""
    _produce(bootstrap, clicks, [2 * i for i in range(first, first + PER_ROUND)])
    _produce(bootstrap, views, [2 * i + 1 for i in range(first, first + PER_ROUND)])


def test_a_receivers_replay_rebuilds_the_canonical_state(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    app_id = unique("catchup-order")
    clicks, views, out = f"{app_id}-clicks", f"{app_id}-views", f"{app_id}-out"
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
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
    runner = Supervised(APP, config, tmp_path / "state", tmp_path / "log")
    per_round = 2 * PER_ROUND * len(KEYS)
    try:
        wait_for(lambda: 0 in runner.pids(), 60, "the processor to start")
        _round(kafka_bootstrap, clicks, views, 0)
        wait_for(
            lambda: len(read_topic(kafka_bootstrap, out, PARTITIONS)) >= per_round,
            120,
            "the first round's outputs",
        )
        generation = scale_to(config, 2, APP)
        wait_for_generation(config, generation, 180, APP)
        _round(kafka_bootstrap, clicks, views, PER_ROUND)
        wait_for(
            lambda: len(read_topic(kafka_bootstrap, out, PARTITIONS)) >= 2 * per_round,
            180,
            "every output",
        )
        time.sleep(2)  # (nothing more may come: each once)
    finally:
        assert runner.stop() == 0, runner.output()[-3000:]
    log = runner.output()
    assert "processor 1 took over" in log, log[-3000:]
    last: dict[bytes, str] = {}
    outputs = read_topic(kafka_bootstrap, out, PARTITIONS)
    for read in sorted(outputs, key=lambda r: (r.partition, r.offset)):
        assert read.key is not None and read.value is not None
        last[read.key] = read.value.decode()
    assert len(outputs) == 2 * per_round
    inputs = {t: read_topic(kafka_bootstrap, t, PARTITIONS) for t in (clicks, views)}
    expected = _canonical(inputs, app_id)
    for key in KEYS:
        assert last[key] == "".join(f"{where}," for where in expected[key]), key
