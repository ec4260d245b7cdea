"""The session-timeout app (``tests/integration/apps/sessions.py``) on the real broker, for
the tick tests: its topics and config, its events, what it emitted, and its state as an
uninterrupted run over the same log builds it (``TestDriver`` over every committed record)."""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from framework.loader import load_app
from framework.runtime.loop import ProcessorRuntime, RuntimeStats
from framework.testing import TestDriver
from framework.time.ticks import TICK_HEADER
from tests.integration.compacted_reads import Read, log_ends, read_topic
from tests.integration.harness import consume_ready, create_app, produce, unique
from tests.integration.test_backfill import state_of

APP = "tests.integration.apps.sessions:app"
TICK_SECONDS = 0.2
IDLE_SECONDS = 0.5
PARTITIONS = 2


@dataclass
class TickWorld:
    """One app: its config file, input and output topics, and state directory."""

    kafka: str
    app_id: str
    config: Path
    events: str
    alerts: str
    state_dir: Path

    @classmethod
    def create(
        cls,
        directory: Path,
        kafka: str,
        admin: AdminClient | None = None,
        *,
        compacted: bool = False,
        **fields: Any,
    ) -> TickWorld:
        """Topics and config (``compacted``: the input is, created so before the app)."""
        events, alerts = unique("events"), unique("alerts")
        if compacted:
            assert admin is not None
            config = {"cleanup.policy": "compact"}
            admin.create_topics([NewTopic(events, PARTITIONS, 1, config=config)])[events].result(30)
        settings: dict[str, Any] = {
            "app_id": unique("ticks"),
            "inputs": [{"topic": events, "partitions": PARTITIONS}],
            "outputs": [{"topic": alerts, "partitions": 1}],
            "initial_processors": 1,
            "bootstrap": "replay",
            "snapshots": {"enabled": False},
            "time": {"tick_interval": TICK_SECONDS, "idle_after": IDLE_SECONDS},
            **fields,
        }
        path = create_app(directory, kafka, APP, **settings)
        return cls(kafka, settings["app_id"], path, events, alerts, directory / "state")

    def send(self, keys: list[bytes], per_key: int) -> int:
        """``per_key`` events of each key, now; returns the wall clock (ms) after."""
        produce(self.kafka, self.events, ((key, b"e") for _ in range(per_key) for key in keys))
        return int(time.time() * 1000)

    def run(self, until: Callable[[RuntimeStats], bool]) -> RuntimeStats:
        """Run processor 0 in this process until ``until`` holds."""
        return ProcessorRuntime(load_app(APP, self.config), 0).run(until=until)

    def run_until_emitted(
        self, outputs: int, settle: float = 1.0, first: Callable[[], object] | None = None
    ) -> RuntimeStats:
        """Run processor 0 until it emitted ``outputs``, then ``settle`` seconds more (at
        most 20 s in all); ``first`` is called after its first step."""
        deadline = time.monotonic() + 20
        done: list[float] = []
        steps: list[bool] = []

        def until(stats: RuntimeStats) -> bool:
            if first is not None and not steps:
                first()
            steps.append(True)
            now = time.monotonic()
            if not done and stats.outputs >= outputs:
                done.append(now)
            return now > deadline or (bool(done) and now - done[0] >= settle)

        return self.run(until)

    def emitted(self) -> list[Read]:
        """Every committed output."""
        return read_topic(self.kafka, self.alerts, 1)

    def log(self) -> list[Read]:
        """Every committed input record (events and ticks)."""
        return read_topic(self.kafka, self.events, PARTITIONS)

    def ticks(self) -> list[Read]:
        """The committed ticks in the input."""
        return [r for r in self.log() if TICK_HEADER in r.headers]

    def state(self) -> dict[tuple[str, bytes], Any]:
        """Every store of the processor's state (``plain``)."""
        return plain(state_of(self.state_dir)[0])

    def uninterrupted(self) -> dict[tuple[str, bytes], Any]:
        """The state one uninterrupted run over the committed input log builds."""
        app = load_app(APP, self.config)
        driver = TestDriver(app, on_error="dead-letter")  # (as the runtime)
        for record in sorted(self.log(), key=lambda r: (r.partition, r.offset)):
            headers: list[tuple[str, bytes | None]] = list(record.headers.items())
            driver.send(
                self.events,
                record.key,
                record.value,
                headers,
                timestamp=record.timestamp,
                partition=record.partition,
            )
        assert driver.dead_letters == [], driver.dead_letters
        database = driver.database
        return plain(
            {
                (store, key): value
                for store in database.store_names()
                for key, value in database.items(store)
            }
        )


def plain(values: dict[tuple[str, bytes], Any]) -> dict[tuple[str, bytes], Any]:
    """``values`` with each one held as JSON bytes parsed (whichever way a store's values
    were read: raw, or decoded)."""
    found: dict[tuple[str, bytes], Any] = {}
    for where, value in values.items():
        found[where] = value
        if isinstance(value, bytes):
            with contextlib.suppress(orjson.JSONDecodeError):
                found[where] = orjson.loads(value)
    return found


def each_once(emitted: list[Read], keys: list[bytes], per_key: int) -> None:
    """Every key's alert and session result were emitted exactly once, counting ``per_key``
    events."""
    alerts: Counter[tuple[str, int]] = Counter()
    sessions: Counter[tuple[bytes | None, int]] = Counter()
    for record in emitted:
        data = json.loads(record.value or b"null")
        if "alert" in data:
            alerts[(data["alert"], data["events"])] += 1
        else:
            sessions[(record.key, data["value"])] += 1
    assert alerts == {(key.decode(), per_key): 1 for key in keys}, alerts
    assert sessions == {(key, per_key): 1 for key in keys}, sessions


def everything_written(
    bootstrap: str, topic: str, partitions: int
) -> list[tuple[bytes | None, list[tuple[str, bytes | None]]]]:
    """``(key, headers)`` of every record in ``topic``'s log, committed or not (read
    ``read_uncommitted`` up to each partition's log end)."""
    ends = log_ends(bootstrap, topic, partitions)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("everything"),
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        found: list[tuple[bytes | None, list[tuple[str, bytes | None]]]] = []
        reached = dict.fromkeys(ends, 0)
        deadline = time.monotonic() + 30
        while any(reached[p] < end for p, end in ends.items()):
            assert time.monotonic() < deadline, f"{topic}: read {reached} of {ends} in 30 s"
            for message in consume_ready(consumer, 1000, 0.5):
                if message.error() is None:
                    headers = message.headers() or []
                    assert isinstance(headers, list)
                    found.append(
                        (message.key(), [(n, v) for n, v in headers if not isinstance(v, str)])
                    )
            for position in consumer.position([TopicPartition(topic, p) for p in ends]):
                reached[position.partition] = max(reached[position.partition], position.offset)
        return found
    finally:
        consumer.close()
