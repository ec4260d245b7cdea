"""A two-input app run for real (``ProcessorRuntime``) on the in-memory Kafka, and the oracle
of the order its records must be applied in: ``canonical_order`` of what the logs hold.

The app keeps, per key, the list of ``"topic@offset"`` of the records applied to it, in the
order they were applied (store ``seen``), and emits nothing.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from framework import App, AppConfig, BatchConfig, KafkaConfig, Record
from framework.config import TopicConfig
from framework.config_time import TimeConfig
from framework.coordination.registry import TopicRegistry
from framework.kafka import TopicSpec
from framework.order import NO_FLOOR, Item, canonical_order
from framework.runtime.loop import ProcessorRuntime, RuntimeStats
from framework.time.ticks import TickRead, is_tick, read_tick, tick_headers
from statestore import ProcessorDatabase, processor_path
from tests.clocks import ManualClock
from tests.sim.broker import Broker
from tests.sim.kafka import Faults, MemoryKafka

#: the inputs, in config order
CLICKS, VIEWS = "clicks", "views"
APP_ID = "two-inputs"


def config(
    tmp_path: Path,
    order: Literal["arrival", "canonical"],
    *,
    guarantee: Literal["exactly-once", "at-least-once"] = "exactly-once",
    in_flight: int = 4,
    max_records: int = 3,
) -> AppConfig:
    """The app's config: one processor, inputs of one partition each, small batches."""
    return AppConfig(
        app_id=APP_ID,
        kafka=KafkaConfig(bootstrap_servers="simulated:9092"),
        inputs=[TopicConfig(topic=CLICKS, partitions=1), TopicConfig(topic=VIEWS, partitions=1)],
        initial_processors=1,
        state_dir=tmp_path,
        processing_guarantee=guarantee,
        batch=BatchConfig(max_records=max_records, max_wait_ms=20, in_flight=in_flight),
        time=TimeConfig(input_order=order, max_input_wait=timedelta(seconds=1)),
    )


def make_app(settings: AppConfig) -> App:
    """The app: each key's records in the order applied (store ``seen``)."""
    app = App(settings)
    app.store("seen")

    @app.processor(stores=["seen"])
    def see(record: Record[bytes], state: Any) -> None:
        state.set([*(state.get() or []), f"{record.topic}@{record.offset}"])

    return app


def memory_kafka(faults: Faults | None = None) -> MemoryKafka:
    """The in-memory Kafka with the inputs (registered) and the dead-letter topic."""
    kafka = MemoryKafka(Broker(random.Random(0)), ManualClock(), faults=faults)
    kafka.create_topics(
        [TopicSpec(CLICKS, 1), TopicSpec(VIEWS, 1), TopicSpec(f"{APP_ID}-dead-letters", 1)]
    )
    registry = TopicRegistry(kafka)
    registry.ensure_topic()
    registry.register(CLICKS, 1)
    registry.register(VIEWS, 1)
    return kafka


def append(kafka: MemoryKafka, topic: str, key: bytes, at: int) -> int:
    """Append a record of ``key`` with timestamp ``at`` to ``topic[0]``; its offset."""
    record = {"key": key, "value": b"", "headers": (), "timestamp_ms": at, "origin": "test"}
    return kafka.broker.append((topic, 0), record).offset


def append_tick(kafka: MemoryKafka, topic: str, floor: int) -> int:
    """Append a tick of the app with ``floor`` to ``topic[0]``; its offset."""
    headers = tuple(tick_headers(floor, floor, APP_ID))
    record = {"key": None, "value": b"", "headers": headers, "timestamp_ms": floor}
    return kafka.broker.append((topic, 0), {**record, "origin": "test"}).offset


@dataclass
class Run:
    """Runs of processor 0 over the same state and Kafka."""

    app: App
    kafka: MemoryKafka
    runs: int = 0
    stats: list[RuntimeStats] = field(default_factory=list)

    def until(self, keys: dict[bytes, int], *, seconds: float = 120.0) -> None:
        """Run until each key of ``keys`` saw that many records (or ``seconds`` of the fake
        clock passed: a run that stalls ends, and the test's assertions say what is missing)."""
        clock = self.kafka.clock
        deadline = clock.monotonic() + seconds

        def done(_stats: RuntimeStats) -> bool:
            return clock.monotonic() > deadline or all(
                len(v) >= n for v, n in zip(self.applied(list(keys)), keys.values(), strict=True)
            )

        self.runs += 1
        self.stats.append(ProcessorRuntime(self.app, 0, kafka=self.kafka).run(until=done))

    def applied(self, keys: list[bytes]) -> list[list[str]]:
        """Each key's records in the order applied, as the committed state holds it."""
        path = processor_path(self.app.config.app_state_dir, 0)
        if not path.exists():
            return [[] for _ in keys]
        database = ProcessorDatabase.open_read_only(path)
        try:
            return [_decoded(database.get("seen", key)) for key in keys]
        finally:
            database.close()


def _decoded(value: Any) -> list[str]:
    return list(value or [])


def canonical(kafka: MemoryKafka, key: bytes) -> list[str]:
    """``key``'s records in the canonical order of what the inputs hold (ticks of the app,
    forced ones too, raise the marks; nothing else does)."""
    items: list[Item[str]] = []
    for index, topic in enumerate((CLICKS, VIEWS)):
        mark = NO_FLOOR
        for record in kafka.broker.records(topic, 0):
            if not kafka.broker.visible(record):
                continue
            headers = list(record.headers or ())
            time: int | None = None
            if record.key is None and is_tick(headers):
                read = read_tick(headers)
                ours = isinstance(read, TickRead) and read.applies_to(APP_ID)
                time = read.floor if ours and isinstance(read, TickRead) else None
            elif record.key is not None:
                time = record.timestamp_ms
            if time is not None:
                mark = max(mark, time)
            where = f"{topic}@{record.offset}"
            items.append(Item((topic, 0), record.offset, record.key, time, mark, index, 0, where))
    by_key: dict[bytes | None, list[Item[str]]] = defaultdict(list)
    for item in canonical_order(items):
        by_key[item.key].append(item)
    return [item.payload for item in by_key[key]]


def forced_ticks(kafka: MemoryKafka, topic: str) -> list[int]:
    """The floors of the visible ticks of ``topic[0]``."""
    floors = []
    for record in kafka.broker.records(topic, 0):
        headers = list(record.headers or ())
        if record.key is None and kafka.broker.visible(record) and is_tick(headers):
            read = read_tick(headers)
            if isinstance(read, TickRead):
                floors.append(read.floor)
    return floors
