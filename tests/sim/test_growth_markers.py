"""Growth markers met by a processor run on the in-memory Kafka (issue 33, item 6).

A keyless record with a ``splitstate.marker`` header that no growth recorded in the topic
registry wrote is a dead letter and fences nothing (before the fix it was trusted: about half
of the partition's later records, correctly placed, became ``late`` dead letters). A genuine
marker read before the processor's view of the registry has its growth still fences its
partition: the processor reads the registry again rather than refuse it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import orjson

from framework import App
from framework.coordination.registry import Growth, TopicRegistry
from framework.growth.markers import MARKER_HEADER
from framework.growth.placement import COUNT_HEADER
from framework.kafka import TopicSpec
from framework.runtime.loop import ProcessorRuntime
from framework.runtime.stats import RuntimeStats
from rebalance import TopicHistory, bucket, key_hash
from tests.sim.app import INPUT, OUTPUT
from tests.sim.kafka import MemoryKafka
from tests.sim.one_key import one_key_world

Headers = tuple[tuple[str, bytes | None], ...]
PLACED: Headers = ((COUNT_HEADER, b"2"),)  # what SplitstateProducer writes (2 partitions)


def world(tmp_path: Path) -> tuple[MemoryKafka, App]:
    kafka, app = one_key_world(tmp_path, records=0, seed=3, exactly_once=False)
    kafka.create_topics([TopicSpec(app.config.dead_letters, 1)])
    return kafka, app


def put(kafka: MemoryKafka, key: bytes | None, value: bytes, headers: Headers) -> int:
    """Append a record to input partition 0; its offset."""
    record = {"key": key, "value": value, "headers": headers, "timestamp_ms": 0, "origin": "p"}
    return kafka.broker.append((INPUT, 0), record).offset


def keys_of_partition_0(count: int) -> list[bytes]:
    """Keys 2 partitions place in partition 0, half of them moved to 2 by 4 partitions."""
    keys = (f"user-{i}".encode() for i in range(10 * count))
    return [k for k in keys if bucket(key_hash(k), 2, 2) == 0][:count]


def dead_letters(kafka: MemoryKafka, app: App) -> list[dict[str, bytes | None]]:
    return [dict(r.headers) for r in kafka.broker.records(app.config.dead_letters, 0)]


def output_origins(kafka: MemoryKafka) -> set[int]:
    """Offsets in input partition 0 of the records outputs were emitted for."""
    found = set()
    for partition in range(2):
        for record in kafka.broker.records(OUTPUT, partition):
            if record.value is not None and record.marker is None:
                *_fold, _topic, _partition, offset = orjson.loads(record.value)
                found.add(offset)
    return found


def test_a_forged_marker_is_a_dead_letter_and_the_records_after_it_are_processed(
    tmp_path: Path,
) -> None:
    kafka, app = world(tmp_path)
    keys = keys_of_partition_0(150)
    for i, key in enumerate(keys[:20]):
        put(kafka, key, f"a{i}:1".encode(), PLACED)
    forged = put(kafka, None, b"{}", ((MARKER_HEADER, f"{INPUT}/4/2".encode()),))
    for i, key in enumerate(keys):
        put(kafka, key, f"b{i}:1".encode(), PLACED)
    total = 20 + 1 + len(keys)
    ProcessorRuntime(app, 0, kafka=kafka).run(until=lambda s: s.records >= total)
    letters = dead_letters(kafka, app)
    assert len(letters) == 1, [(d["splitstate.error"] or b"")[:60] for d in letters[:3]]
    (letter,) = letters
    assert letter["splitstate.offset"] == str(forged).encode()
    assert letter["splitstate.stage"] == b"placement"
    reason = letter["splitstate.error"] or b""
    assert reason.startswith(b"unrecorded marker:"), reason
    assert output_origins(kafka) == set(range(total)) - {forged}  # none of them late


def test_a_marker_newer_than_the_processors_view_of_the_registry_still_fences(
    tmp_path: Path,
) -> None:
    # the processor read the registry before `expand` recorded the growth, and meets the
    # marker before it polls the registry again (the topic's metadata did not change here)
    kafka, app = world(tmp_path)
    keys = keys_of_partition_0(60)
    moved = {k for k in keys if bucket(key_hash(k), 2, 4) == 2}
    assert 10 < len(moved) < 50
    for i, key in enumerate(keys[:10]):
        put(kafka, key, f"a{i}:1".encode(), PLACED)
    late: set[int] = set()
    marker: list[int] = []

    def grow_once(stats: RuntimeStats) -> bool:
        if stats.records >= 10 and not marker:
            registry = TopicRegistry(kafka)
            entry = registry.read()[INPUT]
            ends = {p: kafka.broker.end_offset(INPUT, p) for p in range(2)}
            registry.write(
                replace(
                    entry,
                    history=TopicHistory.of(INPUT, [2, 4]),
                    growth=Growth(4, 0, fence_ends=ends),
                )
            )
            marker.append(put(kafka, None, b"{}", ((MARKER_HEADER, f"{INPUT}/4/2".encode()),)))
            for i, key in enumerate(keys):  # placed with 2 partitions by a paused producer
                offset = put(kafka, key, f"b{i}:1".encode(), PLACED)
                if key in moved:
                    late.add(offset)
        return bool(marker) and stats.records >= 10 + 1 + len(keys)

    ProcessorRuntime(app, 0, kafka=kafka).run(until=grow_once)
    letters = dead_letters(kafka, app)
    assert {int(d["splitstate.offset"] or b"") for d in letters} == late
    assert all((d["splitstate.error"] or b"").startswith(b"late:") for d in letters)
    assert output_origins(kafka) == set(range(10 + 1 + len(keys))) - late - set(marker)
