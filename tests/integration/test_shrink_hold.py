"""A processor across a shrink on the real broker (issue 34): an input of 4 partitions grew to 8
and shrinks back to 5, recorded in the topic registry by hand as `splitstate expand` would
(growth markers in the parents, each survivor's hold offset measured before the count, the
change in progress with its fence, drain markers at the ends of 5, 6 and 7, then the drains).

While the drains are not recorded, every survivor (1, 2, 3) stops at its first record of a
key merged from a deleted partition: the records before it (its own keys) are processed and
committed, nothing at or after it. Once the drains are recorded, it reads on, and each key's
records are processed exactly once, in the order produced: the sequences app dead-letters any
record that is not its key's next one.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from framework.coordination.registry import Growth, TopicEntry, TopicRegistry
from framework.growth.markers import MARKER_HEADER
from framework.growth.placement import COUNT_HEADER
from framework.kafka import Clients
from framework.loader import load_app
from framework.runtime.loop import ProcessorRuntime
from framework.runtime.stats import RuntimeStats
from rebalance import Grow, Shrink, TopicHistory, bucket, key_hash
from tests.integration.harness import TopicReader, unique, write_config

pytestmark = pytest.mark.integration

APP = "tests.integration.apps.sequences:app"
N = 4
KEYS = [f"key-{i:03d}".encode() for i in range(120)]


class Input:
    """The input topic, written by hand: records placed with a given count, and markers."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        self.seqs: Counter[bytes] = Counter()
        #: per partition, each record's offset -> its key (``None``: a marker)
        self.logs: dict[int, dict[int, bytes | None]] = {p: {} for p in range(8)}

    def put(self, key: bytes, count: int, partition: int | None = None) -> None:
        """The key's next record, placed with ``count`` partitions."""
        self.seqs[key] += 1
        value = json.dumps({"producer": "p", "seq": self.seqs[key]}).encode()
        where = bucket(key_hash(key), N, count) if partition is None else partition
        self._send(where, key, value, [(COUNT_HEADER, str(count).encode())])

    def marker(self, partition: int, name: str) -> int:
        """A marker record (keyless, its id in the header); its offset."""
        return self._send(partition, None, b"{}", [(MARKER_HEADER, name.encode())])

    def end(self, partition: int) -> int:
        return len(self.logs[partition])

    def flush(self) -> None:
        """Wait until Kafka has every record sent (offsets as ``logs`` says: one writer)."""
        assert self.producer.flush(30) == 0

    def _send(
        self,
        partition: int,
        key: bytes | None,
        value: bytes,
        headers: list[tuple[str, str | bytes | None]],
    ) -> int:
        offset = self.end(partition)  # (one idempotent writer, no transactions)
        self.producer.produce(self.topic, value, key, partition, headers=headers)
        self.logs[partition][offset] = key
        return offset


def write_before_the_shrink(log: Input) -> dict[int, int]:
    """Records with 4 partitions, the growth to 8 (markers), records with 8; the markers."""
    for _ in range(2):
        for key in KEYS:
            log.put(key, 4)
    markers = {c: log.marker(c - N, f"{log.topic}/8/{c}") for c in range(4, 8)}
    for _ in range(2):
        for key in KEYS:
            log.put(key, 8)
    log.flush()
    return markers


def held_at(log: Input, holds: dict[int, int]) -> dict[int, int]:
    """Each survivor's first record, at or past its hold, of a key merged into it."""
    found = {}
    for t, hold in holds.items():
        merged = (
            offset
            for offset, key in sorted(log.logs[t].items())
            if offset >= hold and key is not None and bucket(key_hash(key), N, 8) >= 5
        )
        found[t] = next(merged)
    return found


def test_a_survivor_holds_merged_keys_until_their_partitions_drained(
    tmp_path: Path, kafka_bootstrap: str, kafka_admin: AdminClient
) -> None:
    topic, out, dead = unique("shrink-in"), unique("shrink-out"), unique("dead")
    for name, partitions in ((topic, 8), (out, 2)):
        kafka_admin.create_topics([NewTopic(name, num_partitions=partitions)])[name].result(30)
    config = write_config(
        tmp_path,
        kafka_bootstrap,
        app_id=unique("shrink"),
        inputs=[{"topic": topic, "partitions": N}],
        outputs=[{"topic": out, "partitions": 2}],
        initial_processors=1,
        dead_letter_topic=dead,
        batch={"max_records": 50, "max_wait_ms": 50},
    )
    app = load_app(APP, config)
    clients = Clients.of(app.config)
    registry = TopicRegistry(clients)
    registry.ensure_topic()
    log = Input(kafka_bootstrap, topic)
    markers = write_before_the_shrink(log)
    holds = {t: log.end(t) for t in (1, 2, 3)}  # measured before the count is recorded
    grown = Grow(8, dict.fromkeys(range(4, 8), 0), markers)
    history = TopicHistory(topic, (N, 8, 5), (grown, Shrink(5, holds)))
    recorded = Growth(5, int(time.time() * 1000), kind="shrink")  # as `expand` records it
    registry.write(TopicEntry(history, growth=recorded))
    for key in KEYS:  # producers still on 8 partitions during the fence
        if bucket(key_hash(key), N, 8) >= 5:
            log.put(key, 8)
    for _ in range(2):
        for key in KEYS:
            log.put(key, 5)
    log.flush()
    held = held_at(log, holds)
    before_hold = sum(  # every record (markers too) the processor may process before the drains
        sum(1 for offset in log.logs[p] if p not in held or offset < held[p]) for p in range(8)
    )
    total: list[int] = []
    quiet_since: list[float] = []

    def drain_once_held(stats: RuntimeStats) -> bool:
        if total:
            return stats.records >= total[0]
        if stats.records > before_hold:
            raise AssertionError(f"processed {stats.records} records, past a held one")
        if stats.records < before_hold:
            return False
        quiet_since.append(time.monotonic())
        if quiet_since[-1] - quiet_since[0] < 3.0:
            return False  # held for 3 s: nothing more is processed while the drains wait
        committed = group_offsets(kafka_bootstrap, app.config.app_id, topic)
        assert {t: committed.get(t) for t in held} == held  # never past a held record
        fence = {d: log.end(d) for d in (5, 6, 7)}
        registry.write(TopicEntry(history, growth=replace(recorded, fence_ends=fence)))
        drains = {d: log.marker(d, f"{topic}/2/5/{d}/drain") for d in (5, 6, 7)}
        log.flush()
        registry.write(TopicEntry(history.with_drains(drains)))
        for key in KEYS:
            log.put(key, 5)
        log.flush()
        total.append(sum(log.end(p) for p in range(8)))
        return False

    try:
        ProcessorRuntime(app, 0).run(until=drain_once_held)
    finally:
        clients.close()
    assert total, "the processor never held its survivors"
    outputs = TopicReader(kafka_bootstrap, out, 2)
    try:
        expected = sum(log.seqs.values())
        outputs.wait_for(lambda r: len(r.records) >= expected, 60, "every output")
        seqs: dict[str, list[int]] = {}
        for _key, value, _headers in outputs.records:
            assert value is not None
            fields = json.loads(value)
            seqs.setdefault(fields["key"], []).append(fields["seq"])
    finally:
        outputs.close()
    assert seqs == {key.decode(): list(range(1, log.seqs[key] + 1)) for key in KEYS}
    letters = TopicReader(kafka_bootstrap, dead, 1)
    try:
        letters.poll(3.0)
        assert letters.records == []  # none out of order, and the markers were markers
    finally:
        letters.close()


def group_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """The group's committed offset of each partition of ``topic`` that has one."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(8)], timeout=10)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found if tp.offset >= 0}
