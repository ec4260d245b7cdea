"""Growth and scaling in one run, growth refusals, a resumed expand, and a producer whose lease
runs out.

Growth and scale are never concurrent: `splitstate expand` refuses while the app scales and
`splitstate scale` refuses while a growth is under way; one after the other they keep per-key
order and exact sequences.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from framework.coordination.registry import TopicRegistry
from framework.coordination.scaling import read_control
from framework.growth.expand import expand_topic
from framework.growth.lease import ProducerLeaseError
from framework.kafka import Clients, TopicSpec
from framework.loader import load_app
from framework.ops.broker import LocalBroker
from framework.producer import SplitstateProducer
from tests.integration.harness import Supervised, TopicReader, splitstate, unique, write_config
from tests.integration.test_growth import (
    LEASE,
    SEQUENCES,
    SequenceProducer,
    check_sequences,
    read_all,
    stop_producing,
)

pytestmark = pytest.mark.integration


def wait_for_generation(config: Path, generation: int, timeout: float = 180) -> None:
    app = load_app(SEQUENCES, config)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = read_control(app)
        if state.generation is not None and state.generation.generation >= generation:
            return
        time.sleep(0.5)
    raise AssertionError(f"generation {generation} did not complete")


def expand(config: Path, topic: str, partitions: int) -> None:
    grown = splitstate(
        "expand", SEQUENCES, "--config", str(config), "--topic", topic,
        "--partitions", str(partitions), timeout=180,
    )  # fmt: skip
    assert grown.returncode == 0, grown.stderr


def test_growth_and_scaling_in_one_run(tmp_path: Path, kafka_bootstrap: str) -> None:
    topic, out = unique("events"), unique("seq-out")
    app_id = unique("grow-scale")
    config = write_config(
        tmp_path,
        kafka_bootstrap,
        app_id=app_id,
        inputs=[{"topic": topic, "partitions": 4, **LEASE}],
        outputs=[{"topic": out, "partitions": 4}],
        initial_processors=2,
        processors=2,
        scaling={"ready_lag": 200},
    )
    assert splitstate("topics", "create", SEQUENCES, "--config", str(config)).returncode == 0
    runner = Supervised(SEQUENCES, config, tmp_path / "state", tmp_path / "run.log")
    producers = [SequenceProducer(kafka_bootstrap, topic, name) for name in ("a", "b")]
    reader = TopicReader(kafka_bootstrap, out, 4)
    try:
        for producer in producers:
            producer.start()
        reader.wait_for(lambda r: len(r.records) > 2000, timeout=120, what="outputs")
        expand(config, topic, 6)
        scaled = splitstate("scale", SEQUENCES, "--config", str(config), "--processors", "3")
        assert scaled.returncode == 0, scaled.stderr
        refused = splitstate(
            "expand", SEQUENCES, "--config", str(config), "--topic", topic, "--partitions", "8"
        )
        assert refused.returncode == 2
        assert "is scaling to 3 processors" in refused.stderr
        wait_for_generation(config, 1)
        expand(config, topic, 8)
        scaled = splitstate("scale", SEQUENCES, "--config", str(config), "--processors", "4")
        assert scaled.returncode == 0, scaled.stderr
        wait_for_generation(config, 2)
        time.sleep(2)
        stop_producing(producers, reader)
    finally:
        assert runner.stop() == 0, runner.output()[-3000:]
        reader.close()
    check_sequences(reader, producers)
    assert read_all(kafka_bootstrap, f"{app_id}-dead-letters", 1) == []
    log = runner.output()
    assert "processor 3 took over" in log


def test_a_growth_blocks_scaling_and_resumes_after_a_crash(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    topic = unique("resume")
    config = write_config(
        tmp_path,
        kafka_bootstrap,
        app_id=unique("resume"),
        inputs=[{"topic": topic, "partitions": 4, **LEASE}],
        initial_processors=2,
    )
    assert splitstate("topics", "create", SEQUENCES, "--config", str(config)).returncode == 0
    client: dict[str, str | int | float | bool] = {"bootstrap.servers": kafka_bootstrap}
    # the app must exist in its control log for `scale`
    runner = Supervised(SEQUENCES, config, tmp_path / "state", tmp_path / "run.log")
    wait_for_generation(config, 0, timeout=120)  # (a fixed 4 s was too short under load)
    assert runner.stop() == 0
    entry = expand_topic(
        Clients(client), topic, 6, report=lambda _line: None, stop_after="recorded"
    )
    assert entry.growth is not None
    assert entry.pending() == [4, 5]
    refused = splitstate("scale", SEQUENCES, "--config", str(config), "--processors", "3")
    assert refused.returncode == 2
    assert "is growing to 6 partitions" in refused.stderr
    status = splitstate("status", SEQUENCES, "--config", str(config))
    assert status.returncode == 0, status.stderr
    assert f"input {topic}: partitions 4 -> 6" in status.stdout
    assert "growing to 6: thresholds pending for [4, 5]" in status.stdout
    assert f"{topic}[4] blocked: waiting for `splitstate expand` to record" in status.stdout
    other = splitstate(
        "expand", SEQUENCES, "--config", str(config), "--topic", topic, "--partitions", "8"
    )
    assert other.returncode == 2
    assert "finish it first" in other.stderr
    resumed = splitstate(
        "expand", SEQUENCES, "--config", str(config), "--topic", topic, "--partitions", "6"
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming the growth" in resumed.stdout
    final = TopicRegistry(Clients(client)).read()[topic]
    assert final.growth is None
    assert final.history.counts == (4, 6)
    assert sorted(final.history.thresholds) == [4, 5]
    status = splitstate("status", SEQUENCES, "--config", str(config))
    assert f"thresholds (partition@offset in its parent): 4@{final.history.thresholds[4]}" in (
        status.stdout
    )
    assert f"{topic}[4] blocked: waiting until {topic}[0] passes offset" in status.stdout
    markers = [(partition, key) for partition, key, _ in read_all(kafka_bootstrap, topic, 6)]
    assert markers == []  # markers have no key: never read as records


def test_a_producer_that_cannot_renew_its_lease_stops(tmp_path: Path) -> None:
    broker = LocalBroker(tmp_path / "broker")
    info = broker.start()
    try:
        client: dict[str, str | int | float | bool] = {"bootstrap.servers": info.bootstrap_servers}
        topic = "leased"
        kafka = Clients(client)

        kafka.create_topics([TopicSpec(topic, 4)])
        TopicRegistry(kafka).ensure_topic()
        TopicRegistry(kafka).register(topic, 4, lease_ms=1500, delivery_timeout_ms=2000)
        producer = SplitstateProducer(client, [topic])
        producer.produce(topic, b"k", json.dumps({}).encode())
        assert producer.flush(30) == 0
    finally:
        broker.stop()
    time.sleep(2.5)
    with pytest.raises(ProducerLeaseError) as error:
        producer.produce(topic, b"k", b"{}")
    assert "could not re-read the splitstate topic registry" in str(error.value)
    assert "Fix: make Kafka reachable" in str(error.value)
    producer.close(1)


def test_a_grown_topic_between_two_apps_keeps_order(tmp_path: Path, kafka_bootstrap: str) -> None:
    """App A's output topic is app B's input; growing it while A writes keeps B's order."""
    source, middle, final = unique("src"), unique("mid"), unique("out")
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    a_config = write_config(
        first,
        kafka_bootstrap,
        app_id=unique("chain-a"),
        inputs=[{"topic": source, "partitions": 4, **LEASE}],
        outputs=[{"topic": middle, "partitions": 4, **LEASE}],
        initial_processors=2,
    )
    b_id = unique("chain-b")
    b_config = write_config(
        second,
        kafka_bootstrap,
        app_id=b_id,
        inputs=[{"topic": middle, "partitions": 4, **LEASE}],
        outputs=[{"topic": final, "partitions": 4}],
        initial_processors=2,
    )
    for config in (a_config, b_config):
        created = splitstate("topics", "create", SEQUENCES, "--config", str(config))
        assert created.returncode == 0, created.stderr
    runners = [
        Supervised(SEQUENCES, a_config, first / "state", first / "run.log"),
        Supervised(SEQUENCES, b_config, second / "state", second / "run.log"),
    ]
    producers = [SequenceProducer(kafka_bootstrap, source, name) for name in ("a", "b")]
    reader = TopicReader(kafka_bootstrap, final, 4)
    try:
        for producer in producers:
            producer.start()
        reader.wait_for(lambda r: len(r.records) > 2000, timeout=120, what="outputs of B")
        expand(b_config, middle, 6)
        expand(b_config, middle, 8)
        time.sleep(3)
        stop_producing(producers, reader)
    finally:
        for runner in runners:
            assert runner.stop() == 0, runner.output()[-3000:]
        reader.close()
    check_sequences(reader, producers)
    assert read_all(kafka_bootstrap, f"{b_id}-dead-letters", 1) == []
    assert "partition counts now" in runners[0].output()  # A switched without restarting
