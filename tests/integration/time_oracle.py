"""The single-processor oracle of an app with time, run on a real broker's input: the input
topic read back (``read_committed``, every partition to its end) and replayed through one
``TestDriver``, partition by partition in lineage order (a parent before the partitions split
from it, so each key's records come in the order it lived them), each tick to the keys that
lived in its partition at its offset (the topic history's homes, by the steps of it the
tick's writer knew: ``Homes.takes_tick``)."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from framework.app import App
from framework.growth.late import Homes
from framework.growth.markers import is_marker_record
from framework.testing import TestDriver
from framework.time.ticks import TickRead, is_tick, read_tick
from rebalance import TopicHistory, key_hash
from tests.integration.harness import consume_ready, unique

__all__ = ["InputRecord", "Oracle", "read_back", "replay"]

#: a header as read back
Header = tuple[str, bytes | None]


@dataclass(frozen=True)
class InputRecord:
    """A record of the input as read back."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]


def read_back(
    bootstrap: str, topic: str, partitions: int, timeout: float = 120.0
) -> list[InputRecord]:
    """Every committed record of ``topic``'s ``partitions``, to each one's end now."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("read-back"),
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        found: list[InputRecord] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for message in consume_ready(consumer, 5000, 0.5):
                partition, offset = message.partition(), message.offset()
                if message.error() is None and partition is not None and offset is not None:
                    headers = tuple(
                        (str(h[0]), h[1] if isinstance(h[1], bytes) else None)
                        for h in message.headers() or []
                    )
                    record = InputRecord(partition, offset, message.key(), message.value(), headers)
                    found.append(record)
            at = consumer.position([TopicPartition(topic, p) for p in range(partitions)])
            if all(tp.offset >= ends[tp.partition] for tp in at):
                return found
        raise AssertionError(f"could not read {topic} back to {ends} in {timeout:.0f}s")
    finally:
        consumer.close()


@dataclass
class Oracle:
    """What one processor given the whole input emits: window results and late readings,
    each ``(key, value)``; ``misplaced``: keyed records where their key did not live (none
    is expected); ``tick_results``: results a tick closed (not a record)."""

    outputs: Counter[tuple[bytes | None, bytes | None]] = field(default_factory=Counter)
    late: Counter[tuple[bytes | None, bytes | None]] = field(default_factory=Counter)
    misplaced: list[InputRecord] = field(default_factory=list)
    tick_results: int = 0
    ticks: int = 0


def replay(app: App, topic: str, records: list[InputRecord], history: TopicHistory) -> Oracle:
    """Replay ``records`` of input ``topic`` (whose partitions grew as ``history`` says)
    through one ``TestDriver`` of ``app`` (configured with the topic's initial partitions).
    Partitions go in ascending order: a partition split off is numbered above its parent."""
    driver = TestDriver(app, on_error="dead-letter")  # (as the runtime)
    homes = Homes(history)
    initial = history.initial_partitions
    oracle = Oracle()
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        partition, offset = record.partition, record.offset
        if record.key is None and is_marker_record(topic, None, record.headers):
            continue
        if record.key is None:
            assert is_tick(record.headers), record
            read = read_tick(record.headers)
            assert not isinstance(read, str), (record, read)
            if not read.applies_to(app.config.app_id):
                continue  # another app's: the app passes it over
            assert (read.steps or 0) <= len(history.steps), (record, read)  # (else dead)

            def lived_here(
                key: bytes,
                partition: int = partition,
                offset: int = offset,
                read: TickRead = read,
            ) -> bool:
                return homes.takes_tick(key_hash(key), partition, offset, read.steps)

            before = len(driver.outputs())
            driver.tick(topic, partition % initial, read.floor, read.wall, keys=lived_here)
            oracle.ticks += 1
            oracle.tick_results += len(driver.outputs()) - before
            continue
        if homes.home(key_hash(record.key), partition, offset) != partition:
            oracle.misplaced.append(record)
            continue
        driver.send(topic, record.key, record.value)  # (placed where its key lives first)
    oracle.outputs.update((o.key, o.value) for o in driver.outputs())
    for letter in driver.dead_letters:
        assert letter.stage == "late", letter
        oracle.late[(letter.key, letter.value)] += 1
    return oracle
