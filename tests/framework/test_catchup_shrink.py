"""A receiver's catch-up across an input that went 4 -> 8 -> 5 -> 7 partitions is exact: every
key it gains is folded from exactly its records, in the order they were produced (issue 34).

The history is written by hand on the in-memory Kafka, as `splitstate expand` would leave it:
growth markers in the parents, each shrink survivor's hold offset (its end when the count was
recorded), old-count records landing in the deleted partitions during the fence, a drain
marker at the end of each deleted partition, then a growth re-using partitions 5 and 6 (their
new lives start at their ends). A key of 5's line is read in 1, in 5's first life, in 1 again
after the shrink, then in 5's second life: only holding each partition at its gates
(``TopicHistory.read_limit``) reads those in that order. Processor 0 of 1 processed everything
(the group's offsets are the ends); processor 1 joins and gains the keys of odd hash.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

from framework.growth.markers import MARKER_HEADER
from framework.growth.placement import COUNT_HEADER
from framework.kafka import TopicSpec
from framework.processing import RecordProcessor
from framework.runtime.catchup import CatchUp
from rebalance import Grow, HandoffEvent, Shrink, TopicHistory, bucket, key_hash, parent
from rebalance.control import ControlState, handoff_record
from rebalance.step_records import history_record
from statestore import DatabaseIdentity, ProcessorDatabase
from tests.clocks import ManualClock
from tests.sim.app import INPUT, make_app
from tests.sim.broker import Broker
from tests.sim.kafka import MemoryKafka

N = 4
APP_ID = "sim"


class Input:
    """The input topic on the in-memory Kafka, written key by key in produced order."""

    def __init__(self, kafka: MemoryKafka) -> None:
        self.kafka = kafka
        self.seqs: Counter[bytes] = Counter()
        self.late: Counter[bytes] = Counter()

    def put(self, partition: int, key: bytes, count: int, *, late: bool = False) -> None:
        """The key's next record, placed with ``count`` partitions (``late``: its producer
        paused past its lease; never applied, so its seq is sent again)."""
        seq = self.seqs[key] + 1
        if not late:
            self.seqs[key] = seq
        else:
            self.late[key] += 1
        headers = ((COUNT_HEADER, str(count).encode()),)
        self._append(partition, key, f"{key.decode()}:{seq}".encode(), headers)

    def marker(self, partition: int, name: str) -> int:
        """A marker record of `splitstate expand`; its offset."""
        return self._append(partition, None, b"{}", ((MARKER_HEADER, name.encode()),))

    def end(self, partition: int) -> int:
        return self.kafka.broker.end_offset(INPUT, partition)

    def _append(self, partition: int, key: bytes | None, value: bytes, headers: object) -> int:
        record = {"key": key, "value": value, "headers": headers, "timestamp_ms": 0, "origin": "p"}
        return self.kafka.broker.append((INPUT, partition), record).offset


def write_history(log: Input, keys: list[bytes]) -> TopicHistory:
    """Records of ``keys`` through 4 -> 8 -> 5 -> 7, and the history's boundaries."""

    def each(count: int, times: int = 1) -> None:
        for _ in range(times):
            for key in keys:
                log.put(bucket(key_hash(key), N, count), key, count)

    each(4, 2)
    markers8 = {c: log.marker(c - N, f"{INPUT}/8/{c}") for c in range(4, 8)}
    each(8, 2)
    holds = {t: log.end(t) for t in (1, 2, 3)}  # measured before 5 is recorded
    for key in keys:  # the fence: producers still on 8 partitions land in the deleted ones
        old = bucket(key_hash(key), N, 8)
        if old >= 5:
            log.put(old, key, 8)
    each(5)
    drains = {d: log.marker(d, f"{INPUT}/2/5/{d}/drain") for d in (5, 6, 7)}
    late = next(k for k in keys if bucket(key_hash(k), N, 8) == 5)
    log.put(5, late, 8, late=True)  # after 5's drain marker: late
    each(5, 2)
    starts = {5: log.end(5), 6: log.end(6)}  # measured before 7 is recorded
    for key in keys:  # the fence: producers still on 5 partitions write the parents
        if bucket(key_hash(key), N, 7) in (5, 6):
            log.put(bucket(key_hash(key), N, 5), key, 5)
    markers7 = {c: log.marker(parent(c, N) or 0, f"{INPUT}/7/{c}") for c in (5, 6)}
    each(7, 2)
    return TopicHistory(
        INPUT,
        (4, 8, 5, 7),
        (
            Grow(8, dict.fromkeys(range(4, 8), 0), markers8),
            Shrink(5, holds, drains),
            Grow(7, starts, markers7),
        ),
    )


def scaled(history: TopicHistory) -> ControlState:
    """Processor 0 of 1 scaling to 2, processor 1 catching up."""
    state = ControlState()
    for record in (
        {
            "type": "app",
            "app_id": APP_ID,
            "initial_processors": 1,
            "inputs": {INPUT: N},
            "key_hash": "murmur3",
        },
        {"type": "generation", "generation": 0, "processors": 1},
        {
            "type": "scale",
            "generation": 1,
            "processors": 2,
            "partitions": {INPUT: history.partitions},
            "histories": {INPUT: history_record(history)},
        },
        handoff_record(1, 0, 1, HandoffEvent.START_CATCH_UP),
    ):
        state = state.apply(record)
    assert state.scaling is not None, state.ignored
    return state


def test_a_catch_up_across_4_8_5_7_applies_each_gained_key_in_produced_order(
    tmp_path: Path,
) -> None:
    kafka = MemoryKafka(Broker(random.Random(3)), ManualClock())
    kafka.create_topics([TopicSpec(INPUT, 8)])
    log = Input(kafka)
    keys = [f"key-{i}".encode() for i in range(40)]
    history = write_history(log, keys)
    ends = {(INPUT, p): log.end(p) for p in range(8)}
    kafka.broker.groups[APP_ID] = dict(ends)  # the old owner processed everything
    app = make_app(
        tmp_path, partitions=N, initial_processors=1, max_records=7, lease_ms=2000, ready_lag=0
    )
    state = scaled(history)
    assert state.scaling is not None
    database = ProcessorDatabase.in_memory(DatabaseIdentity(APP_ID, 1), app.store_specs())
    records = RecordProcessor(app, {INPUT: N}, histories={INPUT: history})
    catchup = CatchUp(
        1, 1, state.scaling, kafka=kafka, group_id=APP_ID, database=database, records=records
    )
    handoff = state.scaling.handoffs[(0, 1)]
    assert sorted(p for _t, p in handoff.partitions) == [1, 3, 5, 7]
    for _ in range(2000):
        if catchup.caught_up(handoff, 0):
            break
        catchup.step(7)
    released = {p: ends[p] for p in handoff.partitions}
    state = state.apply(handoff_record(1, 0, 1, HandoffEvent.CAUGHT_UP))
    state = state.apply(handoff_record(1, 0, 1, HandoffEvent.RELEASE, released))
    assert state.scaling is not None
    handoff = state.scaling.handoffs[(0, 1)]
    catchup.release(handoff)
    for _ in range(2000):
        if catchup.finished(handoff):
            break
        catchup.step(7)
    assert catchup.finished(handoff)
    batch = database.begin()
    folds = {key: batch.store("folds").get(key) for key in keys}
    batch.abort()
    catchup.close()
    gained = [k for k in keys if key_hash(k) % 2 == 1]
    assert gained and log.late
    for key in keys:
        fold = folds[key]
        if key not in gained:
            assert fold is None, key
            continue
        assert fold is not None, key
        expected = {"n": log.seqs[key], "last": {key.decode(): log.seqs[key]}, "bad": 0}
        assert fold == expected, key
