"""A compacted input's ticks have a key of their own (``framework.time.ticks.tick_key``):
every reader that takes keyless records for ticks takes these for ticks too. A receiver's
catch-up applies them to the keys it gains (not as a record of a key it does not gain), and
the live loop's holds make them wait as a tick, for every key it could reach (not as a
record of its key's hash)."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from framework.kafka import Message
from framework.processing import StoredMessage
from framework.runtime.holds import Taken
from framework.time.ticks import tick_headers, tick_key
from rebalance import bucket, key_hash
from tests.framework.test_holds import N, holds, nothing
from tests.framework.time_world import (
    GRACE,
    SIZE,
    TOPIC,
    Owner,
    append_record,
    catch_up,
    keys_in,
    memory_kafka,
    released,
    scaled,
    started,
    state_of,
    stored,
    window_app,
)
from tests.sim.kafka import MemoryKafka


def _append_keyed_tick(kafka: MemoryKafka, partition: int, floor: int, unique: str) -> int:
    headers = tuple(tick_headers(floor, floor))
    record = {"key": tick_key(TOPIC, unique), "value": b"", "headers": headers}
    stored = {**record, "timestamp_ms": floor, "origin": "test"}
    return int(kafka.broker.append((TOPIC, partition), stored).offset)


def test_a_catch_up_applies_a_keyed_tick_to_the_keys_it_gains(tmp_path: Path) -> None:
    """Scale 1 -> 2: processor 1 gains partition 1, where a keyed tick closed two keys'
    windows; the receiver ends with the old owner's time state (before: it skipped the tick
    as a record of a key it does not gain, and kept both windows open)."""
    app = window_app(tmp_path, partitions=2, initial=1)
    kafka = memory_kafka(2)
    a, b = keys_in(1, 2, 2, 2)
    append_record(kafka, 1, a, 1, at=1_000)
    append_record(kafka, 1, b, 2, at=2_000)
    final = _append_keyed_tick(kafka, 1, SIZE + GRACE + 1, "one") + 1
    owner = Owner(app, 0)
    owner.process(stored(kafka, 1))
    assert len(owner.emitted) == 1  # the tick closed both windows
    state = released(
        scaled(started("timed", 1, 2), 1, 2, {"counts": [2], "thresholds": {}}), 0, 1, {1: final}
    )
    receiver = Owner(app, 1).database
    catch_up(kafka, app, state, 1, receiver)
    expected = state_of(owner.database, [a, b])
    assert expected["splitstate.time"] and not expected["splitstate.due"]
    assert state_of(receiver, [a, b]) == expected


def test_a_keyed_tick_waits_as_a_tick() -> None:
    """In a growth's new partition 2 a tick waits until the parent passed the marker, keyed
    or not; a keyed one whose key hashes to a key that would not wait is no exception."""
    held, _consumer = holds()
    key = next(
        k
        for k in (tick_key("in", str(i)) for i in range(10_000))
        if bucket(key_hash(k), N, 4) == 0  # as a record: not 2's key, nothing to wait for
    )
    message = StoredMessage("in", 2, 0, key, b"", None, list(tick_headers(50_000, 50_000)))
    tick: Taken = (cast("Message", message), "in", 2, 0)
    assert held.cut([tick], nothing) == []
    assert held.held[("in", 2)].tick
