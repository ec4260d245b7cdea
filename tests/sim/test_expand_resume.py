"""`expand` resumed after retention deleted a parent partition past its fence end: the marker
it looks for (written before the crash, or never) is searched from the earliest retained record,
not from a deleted offset where the consumer would wait a minute for nothing (the simulation
found a growth that seemed stuck: 60 s per new partition)."""

from __future__ import annotations

import random

from framework.coordination.registry import TopicRegistry
from framework.growth.expand import expand_topic
from framework.kafka import TopicSpec
from tests.clocks import ManualClock
from tests.sim.broker import Broker
from tests.sim.kafka import MemoryKafka


def test_a_resumed_expand_does_not_wait_on_a_fence_end_that_retention_deleted() -> None:
    clock = ManualClock()
    kafka = MemoryKafka(Broker(random.Random(0)), clock)
    kafka.create_topics([TopicSpec("in", 2)])
    registry = TopicRegistry(kafka)
    registry.ensure_topic()
    registry.register("in", 2)
    entry = expand_topic(kafka, "in", 4, report=lambda _l: None, stop_after="fenced")
    assert entry.growth is not None and entry.growth.fence_ends is not None
    fence_end = entry.growth.fence_ends[0]
    producer = kafka.producer()
    for _ in range(5):  # records after the fence (keys that stay), then retention
        producer.produce("in", b"v", b"k", 0)
    producer.flush(5)
    kafka.broker.delete_before("in", 0, fence_end + 3)
    started = clock.monotonic()
    entry = expand_topic(kafka, "in", 4, report=lambda _l: None)
    assert clock.monotonic() - started < 10.0
    assert entry.growth is None and entry.partitions == 4
    assert entry.history.thresholds[2] >= fence_end + 3  # a new marker, after what is retained
