"""Review (time, 2): ticks a processor writes and what reading them does.

The state is a real (in-memory) database written by the real ``RecordProcessor``; ticks are
decided by the real ``TickWriter`` on a ``ManualClock`` and read back as the records a
processor reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from framework import App, AppConfig, Record
from framework.coordination.registry import TopicEntry
from framework.processing import RecordProcessor, StoredMessage
from framework.runtime.ticking import Tick, TickWriter
from framework.time import Count, KeyTimers, Timer, Tumbling
from framework.time.ticks import tick_headers
from rebalance import TopicHistory, bucket, key_hash
from rebalance.positions import Position
from statestore import DatabaseIdentity, ProcessorDatabase
from tests.clocks import ManualClock

TOPIC = "events"
PARTITIONS = 2
NOW = 1_700_000_000.0  # the wall clock, seconds
T0 = 1_700_000_000_000  # event times, ms


def _config(**time: Any) -> AppConfig:
    return AppConfig.model_validate(
        {
            "app_id": "review-ticks",
            "inputs": [{"topic": TOPIC, "partitions": PARTITIONS}],
            "outputs": [{"topic": "out"}],
            "initial_processors": 1,
            "time": {"tick_interval": 1.0, **time},
        }
    )


def reminding_app() -> App:
    """Version 1: every event sets a reminder (an event-time timer) a second after it."""
    app = App(_config())
    app.store("count", int)

    @app.timer("reminder", stores=["count"])
    def remind(timer: Timer, count: Any) -> None:
        count.set(0)

    @app.processor(stores=["count", "reminder"])
    def event(record: Record[bytes], stores: dict[str, Any]) -> None:
        stores["count"].set(stores["count"].get(0) + 1)
        reminders: KeyTimers = stores["reminder"]
        reminders.set_after(1_000, "r")

    return app


def windowed_app() -> App:
    """Version 2: the reminders are gone; a minute's count per key instead."""
    app = App(_config())
    app.store("count", int)
    app.windows_store("minute", Tumbling(60_000), Count())

    @app.processor(stores=["count", "minute"])
    def event(record: Record[bytes], stores: dict[str, Any]) -> None:
        stores["count"].set(stores["count"].get(0) + 1)
        stores["minute"].add(1)

    return app


@dataclass
class _Layout:
    inputs: dict[str, TopicEntry]


@dataclass
class _Reading:
    layout: _Layout
    flowing: set[Position] = field(default_factory=set)
    restore_below: dict[Position, int] = field(default_factory=dict)


class _Processor:
    """One processor of ``app`` reading every partition of ``events`` over ``database``."""

    def __init__(self, app: App, database: ProcessorDatabase, clock: ManualClock) -> None:
        history = TopicHistory.of(TOPIC, [PARTITIONS])
        self.database = database
        self.records = RecordProcessor(app, {TOPIC: PARTITIONS}, histories={TOPIC: history})
        reading = _Reading(
            _Layout({TOPIC: TopicEntry(history)}), {(TOPIC, p) for p in range(PARTITIONS)}
        )
        self.clock = clock
        writer = TickWriter.of(app.config.time, self.records, reading, database, clock)
        assert writer is not None
        self.writer = writer

    def send(self, key: bytes | None, at_ms: int, partition: int, headers: Any = ()) -> None:
        """One record at the partition's next offset, as one committed batch."""
        offset = self.database.offsets().get((TOPIC, partition), 0)
        message = StoredMessage(TOPIC, partition, offset, key, b"", at_ms, list(headers))
        batch = self.database.begin()
        _outputs, dead = self.records.process(batch, message)
        assert dead is None, dead
        batch.set_offset(TOPIC, partition, offset + 1)
        batch.commit()

    def read(self, tick: Tick) -> None:
        """The tick written, read back where it landed (the partition's next offset)."""
        self.send(None, 0, tick.partition, tick_headers(tick.floor, tick.wall))

    def decide(self, after: float) -> list[Tick]:
        self.clock.now += after
        batch = self.database.begin()
        try:
            return self.writer.decide(batch, {})
        finally:
            batch.abort()


def _database(app: App) -> ProcessorDatabase:
    return ProcessorDatabase.in_memory(DatabaseIdentity("review-ticks", 0), app.store_specs())


def test_a_due_item_of_a_store_the_app_no_longer_declares_does_not_tick_for_ever() -> None:
    """Version 1 left key ``a`` a reminder; version 2 no longer declares the timer store
    (``TimeKeeper`` keeps such timers and never fires them). A record of another key moves
    the partition's floor past the reminder: one tick may be written, but once it was read
    nothing of ``a`` is due any more. (Was: ``a``'s ``splitstate.due`` entry kept the
    reminder, the tick left the key as it was, and a tick followed every interval for ever.)"""
    v1, v2 = reminding_app(), windowed_app()
    database = _database(v1)
    a = b"a"
    partition = bucket(key_hash(a), PARTITIONS, PARTITIONS)
    other = next(
        k
        for k in (b"k%d" % i for i in range(100))
        if bucket(key_hash(k), PARTITIONS, PARTITIONS) == partition
    )
    clock = ManualClock(NOW)
    _Processor(v1, database, clock).send(a, T0, partition)  # its reminder: due at T0 + 1 s
    upgraded = _Processor(v2, database, clock)
    upgraded.send(other, T0 + 5_000, partition)  # the floor passes the reminder
    written = 0
    for _ in range(5):
        ticks = upgraded.decide(after=1.0)
        for tick in ticks:
            upgraded.read(tick)
        written += len(ticks)
    assert written <= 1
