"""A small world for tests of one processor: records of one key in input partition 0 of the
in-memory Kafka, and the fold app (``tests/sim/app.py``) to run over them."""

from __future__ import annotations

import random
from pathlib import Path

from framework import App
from framework.coordination.registry import TopicRegistry
from framework.kafka import TopicSpec
from tests.clocks import ManualClock
from tests.sim.app import INPUT, OUTPUT, make_app
from tests.sim.broker import Broker
from tests.sim.kafka import MemoryKafka

__all__ = ["KEY", "one_key_world"]

#: the key: linear hashing over 2 partitions places it in partition 0 (``b"k"`` goes to 1)
KEY = b"a"


def one_key_world(
    tmp_path: Path, *, records: int, seed: int, exactly_once: bool, in_flight: int = 1
) -> tuple[MemoryKafka, App]:
    """Values ``p:1 .. p:<records>`` of ``KEY`` in input partition 0 (of 2, registered, as
    is the output topic), and the fold app over them, processor 0 of 1, batches of 5."""
    kafka = MemoryKafka(Broker(random.Random(seed)), ManualClock())
    kafka.create_topics([TopicSpec(INPUT, 2), TopicSpec(OUTPUT, 2)])
    registry = TopicRegistry(kafka)
    registry.ensure_topic()
    registry.register(INPUT, 2)
    registry.register(OUTPUT, 2)
    for seq in range(1, records + 1):
        record = {"key": KEY, "value": f"p:{seq}".encode(), "headers": ()}
        kafka.broker.append((INPUT, 0), {**record, "timestamp_ms": 0, "origin": "p"})
    app = make_app(
        tmp_path,
        partitions=2,
        initial_processors=1,
        max_records=5,
        lease_ms=2000,
        ready_lag=0,
        exactly_once=exactly_once,
        in_flight=in_flight,
    )
    return kafka, app
