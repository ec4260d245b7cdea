"""A receiver reads on past T1 and keeps those records (``ReadAhead``) instead of dropping
and fetching them again: once RELEASE arrives it applies them up to F without another fetch.
It never applies a record past T1 (or F), and a partition whose read-ahead is full is paused
and read again from where the catch-up is, so no record is skipped or applied twice."""

from __future__ import annotations

import random
from pathlib import Path

from framework.kafka import TopicSpec
from framework.runtime.catchup import CatchUp
from framework.runtime.read_ahead import ReadAhead
from rebalance import HandoffEvent, bucket, key_hash
from rebalance.control import Handoff, handoff_record
from statestore import DatabaseIdentity, ProcessorDatabase, StoreSpec
from tests.clocks import ManualClock
from tests.framework.test_catchup_crashes import (
    SCALE_1_TO_2,
    TOPIC,
    counting_app,
    receiver,
    started,
)
from tests.sim.broker import Broker, StoredRecord
from tests.sim.kafka import MemoryKafka
from tests.sim.producer import SimMessage

RECORDS = 30
MOVED = (TOPIC, 1)


def world(committed: int, value: bytes = b"v") -> tuple[MemoryKafka, list[bytes]]:
    """``RECORDS`` records (of ``value``) of 3 keys in partition 1 (moving from processor 0
    to 1), of which the old owner committed the first ``committed`` (T1)."""
    kafka = MemoryKafka(Broker(random.Random(0)), ManualClock())
    kafka.create_topics([TopicSpec(TOPIC, 2)])
    keys = [k for k in (f"k{i}".encode() for i in range(40)) if bucket(key_hash(k), 2, 2) == 1]
    for i in range(RECORDS):
        record = {"key": keys[i % 3], "value": value, "headers": (), "timestamp_ms": 0}
        kafka.broker.append(MOVED, {**record, "origin": "test"})
    kafka.broker.groups["crashy"] = {MOVED: committed}
    return kafka, keys[:3]


def released_at(final: int) -> Handoff:
    """Generation 1's handoff 0 -> 1, released at ``final``."""
    state = started("crashy", 1, 2).apply(SCALE_1_TO_2)
    for event, offsets in [
        (HandoffEvent.START_CATCH_UP, None),
        (HandoffEvent.CAUGHT_UP, None),
        (HandoffEvent.RELEASE, {MOVED: final}),
    ]:
        state = state.apply(handoff_record(1, 0, 1, event, offsets))
    assert state.scaling is not None, state.ignored
    return state.scaling.handoffs[(0, 1)]


def counts(database: ProcessorDatabase, keys: list[bytes]) -> list[int]:
    batch = database.begin()
    found = [batch.store("counts").get(key) or 0 for key in keys]
    batch.abort()
    return found


def expected(keys: list[bytes], upto: int) -> list[int]:
    return [sum(1 for i in range(upto) if i % 3 == n) for n in range(len(keys))]


def catch_up(
    tmp_path: Path, kafka: MemoryKafka, read_ahead: int
) -> tuple[CatchUp, ProcessorDatabase]:
    database = ProcessorDatabase.in_memory(DatabaseIdentity("crashy", 1), [StoreSpec("counts")])
    return receiver(kafka, counting_app(tmp_path), database, read_ahead=read_ahead), database


def steps(catchup: CatchUp, count: int = 20) -> None:
    for _ in range(count):
        catchup.step(50, 0.0)


def test_records_past_t1_wait_and_are_applied_to_f_without_another_fetch(
    tmp_path: Path,
) -> None:
    kafka, keys = world(committed=10)
    catchup, database = catch_up(tmp_path, kafka, read_ahead=100)
    steps(catchup)
    assert catchup.positions[MOVED] == 10  # never past T1
    assert counts(database, keys) == expected(keys, 10)
    fetched: list[int] = []

    def watch(_kafka: str, consumer: str, records: list[StoredRecord]) -> None:
        if consumer == "catch-up consumer":
            fetched.extend(r.offset for r in records if r.offset < 25)

    kafka.broker.fetch_watchers.append(watch)
    handoff = released_at(25)
    catchup.release(handoff)
    catchup.step(50, 0.0)
    assert catchup.positions[MOVED] == 25 and catchup.finished(handoff)
    assert fetched == []  # records 10..24 came from the read-ahead
    steps(catchup)
    assert catchup.positions[MOVED] == 25  # never past F
    assert counts(database, keys) == expected(keys, 25)


def test_a_full_read_ahead_pauses_the_partition_and_reads_it_again_after(
    tmp_path: Path,
) -> None:
    """4 records kept (3..6), the rest of that fetch dropped and the partition paused; once
    T1 moves to the end they are applied and the partition is read again from 7."""
    kafka, keys = world(committed=3)
    catchup, database = catch_up(tmp_path, kafka, read_ahead=4)
    steps(catchup)
    assert catchup.positions[MOVED] == 3
    kafka.broker.groups["crashy"] = {MOVED: RECORDS}
    catchup.refresh(force=True)
    steps(catchup)
    assert catchup.positions[MOVED] == RECORDS
    assert counts(database, keys) == expected(keys, RECORDS)
    assert catchup.replayed == RECORDS


def test_records_past_f_are_not_kept_and_a_completed_partition_keeps_none(
    tmp_path: Path,
) -> None:
    """Found in review: records past F of a partition taken over stayed in memory until the
    whole scale ended (up to ``catchup_batch`` of them, of any size)."""
    kafka, keys = world(committed=10)
    catchup, database = catch_up(tmp_path, kafka, read_ahead=100)
    steps(catchup)
    handoff = released_at(10)
    catchup.release(handoff)
    steps(catchup)
    assert catchup.finished(handoff)
    assert len(catchup._ahead) == 0  # 11..29 will never be applied here
    catchup.complete(handoff)
    steps(catchup)
    assert len(catchup._ahead) == 0 and catchup.positions[MOVED] == 10
    assert counts(database, keys) == expected(keys, 10)


def test_the_read_ahead_keeps_at_most_its_bytes_and_reads_the_rest_again(
    tmp_path: Path,
) -> None:
    """Records of 2 MiB (60 MiB in all): at most 32 MiB are kept; the rest are read again
    once those are applied."""
    kafka, keys = world(committed=0, value=b"x" * (2 << 20))
    catchup, database = catch_up(tmp_path, kafka, read_ahead=5000)
    steps(catchup, 3)
    ahead = catchup._ahead
    assert 0 < ahead.bytes <= ahead.max_bytes == 32 << 20
    kafka.broker.groups["crashy"] = {MOVED: RECORDS}
    catchup.refresh(force=True)
    steps(catchup)
    assert catchup.positions[MOVED] == RECORDS and ahead.bytes == 0
    assert counts(database, keys) == expected(keys, RECORDS)


def message(offset: int) -> SimMessage:
    return SimMessage(StoredRecord(TOPIC, 1, offset, b"k", b"v", (), 0, "test"))


def test_read_ahead_keeps_order_and_capacity_and_ignores_records_fetched_again() -> None:
    ahead = ReadAhead(3)
    assert ahead.hold(MOVED, message(5), 5) and ahead.hold(MOVED, message(6), 6)
    assert ahead.hold(MOVED, message(6), 6)  # fetched again: ignored, not kept twice
    assert ahead.hold(MOVED, message(8), 8)
    assert not ahead.hold(MOVED, message(9), 9)  # full
    assert [m.offset() for m in ahead.due(lambda _p: 7, 10)] == [5, 6]
    assert ahead.holding(MOVED) and len(ahead) == 1
    assert [m.offset() for m in ahead.due(lambda _p: None, 10)] == [8]
    assert not ahead.holding(MOVED) and len(ahead) == 0
