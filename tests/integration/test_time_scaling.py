"""Windowed averages with late readings through 2 -> 3 -> 2 processors, a growth 4 -> 8 and
SIGKILLs, on a real broker: every window's final mean equals what one processor computes from
the whole input (a ``TestDriver`` replaying the input read back, ``time_oracle``), and appears
exactly once on the output topic (``read_committed``); the late readings are dead letters
(stage ``late``), each once. Ticks are written into every input partition after each round of
readings by the test's own producer (``tick_headers``), so the oracle replays the same ticks
at the same positions."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from framework import AppConfig
from framework.coordination.registry import TopicRegistry
from framework.kafka import Clients
from framework.loader import load_app
from framework.producer import SplitstateProducer
from framework.time.ticks import tick_headers
from tests.integration.harness import Supervised, TopicReader, splitstate, unique, write_config
from tests.integration.test_scaling import scale_to, wait_for_generation
from tests.integration.time_oracle import read_back, replay

pytestmark = pytest.mark.integration

APP = "tests.integration.apps.averages:app"
LEASE = {"producer_lease_ms": 4000, "producer_delivery_timeout_ms": 3000}
SENSORS = 40
#: event time a round moves on; a tick's floor lags its round by this much
ROUND_MS, TICK_LAG_MS = 1_000, 4_000
#: the floor of the last ticks: every window closes
END_MS = 10**12


class Readings(threading.Thread):
    """Writes rounds of readings until stopped: one per sensor a round, event time one
    second later each round (a sensor is quiet one round in four of a 15-round cycle, so
    only ticks close its windows then), 3% of them late by 30 s or more; after each round,
    once the readings are delivered, a tick into every partition of the count in force."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        settings: dict[str, str | int | float | bool] = {"bootstrap.servers": bootstrap}
        self.producer = SplitstateProducer(settings, [topic])
        self.clients = Clients(settings)
        self.ticks = self.clients.producer()
        self.known = 0  # partitions the tick producer's metadata has
        self.rounds = 0
        self.written = 0
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        rng = random.Random(35)
        try:
            while not self.stop_event.is_set():
                base = self.rounds * ROUND_MS
                for sensor in range(SENSORS):
                    if (self.rounds // 15 + sensor) % 4 == 0:
                        continue  # quiet
                    t = base + rng.randrange(ROUND_MS)
                    if rng.random() < 0.03:
                        t = base - 30_000 - rng.randrange(5_000)
                    self.written += 1
                    reading = {"t": t, "v": rng.randrange(100), "n": self.written}
                    self.producer.produce(self.topic, f"sensor-{sensor:02d}".encode(), reading)
                assert self.producer.flush(30) == 0
                self.tick(base - TICK_LAG_MS, base)
                self.rounds += 1
                time.sleep(0.05)
        except BaseException as error:  # reported by the test
            self.error = error

    def tick(self, floor: int, wall: int) -> None:
        """A tick into every partition of the count in force, delivered."""
        count = self.producer.partitioner.partitions(self.topic)
        deadline = time.monotonic() + 30
        while self.known < count:  # new partitions: produce once its metadata has them
            assert time.monotonic() < deadline, f"the producer never saw {count} partitions"
            self.known = self.ticks.partition_count(self.topic)
            time.sleep(0.0 if self.known >= count else 0.2)
        for partition in range(count):
            headers = tick_headers(floor, wall)
            self.ticks.produce(self.topic, b"", None, partition, headers=headers)
        assert self.ticks.flush(30) == 0

    def finish(self) -> None:
        """Stop, write the ticks that close every window, and close the producers."""
        self.stop_event.set()
        self.join(60)
        assert self.error is None, repr(self.error)
        self.tick(END_MS, END_MS)
        assert self.producer.close(30) == 0
        self.ticks.close()
        self.clients.close()


@pytest.mark.parametrize("bootstrap", ["snapshot", "replay"])
def test_windowed_averages_are_exact_and_once_through_scaling_growth_and_kills(
    tmp_path: Path, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch, bootstrap: str
) -> None:
    """``bootstrap``: receivers build their keys from the sources' snapshots and replay the
    tail, or replay every record (and tick) from the start."""
    topic, out, app_id = unique("readings"), unique("averages"), unique("time-scaling")
    config = write_config(
        tmp_path,
        kafka_bootstrap,
        app_id=app_id,
        inputs=[{"topic": topic, "partitions": 4, **LEASE}],
        outputs=[{"topic": out, "partitions": 4}],
        initial_processors=2,
        processors=2,
        scaling={"ready_lag": 200},
        bootstrap=bootstrap,
    )
    assert splitstate("topics", "create", APP, "--config", str(config)).returncode == 0
    # the leaving processor dies right after it released its partitions to the receiver
    monkeypatch.setenv("SPLITSTATE_FAULT", "2:after:RELEASE")
    runner = Supervised(APP, config, tmp_path / "state", tmp_path / "run.log")
    writer = Readings(kafka_bootstrap, topic)
    reader = TopicReader(kafka_bootstrap, out, 4)
    try:
        writer.start()
        reader.wait_for(lambda r: len(r.records) > 50, timeout=120, what="first window results")
        wait_for_generation(config, scale_to(config, 3, APP), timeout=180, app_name=APP)
        grown = splitstate(
            "expand", APP, "--config", str(config), "--topic", topic, "--partitions", "8",
            timeout=180,
        )  # fmt: skip
        assert grown.returncode == 0, grown.stderr
        time.sleep(2)
        os.kill(runner.pids()[1], signal.SIGKILL)  # a processor dies while ticks flow
        time.sleep(2)
        wait_for_generation(config, scale_to(config, 2, APP), timeout=180, app_name=APP)
        time.sleep(2)
        writer.finish()
        app = load_app(APP, config)
        app.configure(AppConfig.load(config))
        entry = TopicRegistry(Clients({"bootstrap.servers": kafka_bootstrap})).read()[topic]
        assert entry.history.counts == (4, 8)
        oracle = replay(app, topic, read_back(kafka_bootstrap, topic, 8), entry.history)
        expected = oracle.outputs
        reader.wait_for(
            lambda r: Counter((k, v) for k, v, _ in r.records) >= expected,
            timeout=180,
            what=f"the {sum(expected.values())} window results of the oracle",
        )
        reader.poll(3.0)  # anything emitted twice would be read by now
    finally:
        writer.stop_event.set()
        status = runner.stop()
        reader.close()
    log = runner.output()
    assert status == 0, log[-3000:]
    assert "processor 2 exited with status -9; restarting" in log, log[-3000:]
    assert "processor 1 exited with status -9; restarting" in log, log[-3000:]
    assert "processor 2 took over" in log and "processor 0 took over" in log, log[-3000:]
    # from the sources' snapshots, then their tails; or everything replayed
    assert ("before that it took" in log) is (bootstrap == "snapshot"), log[-3000:]
    assert not oracle.misplaced
    assert max(expected.values()) == 1 and len(expected) > 200, len(expected)
    assert oracle.tick_results > 0 and sum(oracle.late.values()) > 10, oracle
    seen = Counter((k, v) for k, v, _ in reader.records)
    assert seen == expected, (seen - expected, expected - seen)
    letters = TopicReader(kafka_bootstrap, f"{app_id}-dead-letters", 1)
    try:
        letters.wait_for(
            lambda r: len(r.records) >= sum(oracle.late.values()), timeout=60, what="dead letters"
        )
        letters.poll(2.0)
    finally:
        letters.close()
    stages = Counter(dict(h).get("splitstate.stage") for _, _, h in letters.records)
    assert stages == Counter({b"late": sum(oracle.late.values())}), stages
    assert Counter((k, v) for k, v, _ in letters.records) == oracle.late
