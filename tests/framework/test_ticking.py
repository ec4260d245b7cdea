"""How a processor decides its ticks (``framework.runtime.ticking``): on which partitions,
when, and with which floor and wall; and that a compacted topic's keyed tick is read as a
tick. The state is a real (in-memory) database written by the real ``RecordProcessor``;
time is a ``ManualClock``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import orjson
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from framework.config import AppConfig
from framework.coordination.registry import TopicEntry
from framework.errors import SplitstateError
from framework.kafka import Clients, DeliveryError, KafkaProducer, TransactionAbortableError
from framework.processing import RecordProcessor, StoredMessage
from framework.records import EncodedOutput
from framework.runtime.ticking import NO_FLOOR, Tick, TickWriter, tick_floor, write_ticks
from framework.time.applying import FLOOR_SCOPE
from framework.time.ticks import TICK_HEADER, is_tick_key, tick_headers, tick_key
from rebalance import TopicHistory, bucket, key_hash
from rebalance.positions import Position
from statestore import DatabaseIdentity, ProcessorDatabase
from tests.clocks import ManualClock
from tests.integration.apps.sessions import GAP_MS, app

TOPIC = "events"
NOW = 1_700_000_000.0  # the wall clock, seconds


@dataclass
class _Layout:
    inputs: dict[str, TopicEntry]


@dataclass
class _Reading:
    """The part of ``Assignment`` ticks are decided from."""

    layout: _Layout
    flowing: set[Position] = field(default_factory=set)
    restore_below: dict[Position, int] = field(default_factory=dict)


class _World:
    """One processor of the sessions app reading every partition of ``topic``."""

    def __init__(
        self,
        partitions: int = 2,
        *,
        idle: float | None = None,
        compacted: bool = False,
        history: TopicHistory | None = None,
        topic: str = TOPIC,
    ) -> None:
        self.topic = topic
        config = AppConfig.model_validate(
            {
                "app_id": "ticks",
                "inputs": [{"topic": topic, "partitions": partitions}],
                "outputs": [{"topic": "alerts"}],
                "initial_processors": 1,
                "time": {"tick_interval": 1.0, "idle_after": idle},
            }
        )
        app.configure(config)
        self.database = ProcessorDatabase.in_memory(DatabaseIdentity("ticks", 0), app.store_specs())
        history = history or TopicHistory.of(topic, [partitions])
        self.records = RecordProcessor(app, {topic: partitions}, histories={topic: history})
        self.reading = _Reading(
            _Layout({topic: TopicEntry(history, compacted=compacted)}),
            {(topic, p) for p in range(history.created)},
        )
        self.clock = ManualClock(NOW)
        writer = TickWriter.of(config.time, self.records, self.reading, self.database, self.clock)
        assert writer is not None
        self.writer = writer
        self.partitions = partitions
        self.offsets: dict[Position, int] = {}

    def home(self, key: bytes) -> int:
        return bucket(key_hash(key), self.partitions, self.partitions)

    def send(
        self,
        key: bytes | None,
        at_ms: int,
        *,
        partition: int | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
    ) -> list[EncodedOutput]:
        """Process one record (at the partition's next offset) as one committed batch."""
        partition = self.home(key or b"") if partition is None else partition
        topic = self.topic
        offset = self.offsets.get((topic, partition), 0)
        message = StoredMessage(topic, partition, offset, key, b"", at_ms, headers or [])
        batch = self.database.begin()
        outputs, dead = self.records.process(batch, message)
        assert dead is None, dead
        self.offsets[(topic, partition)] = offset + 1
        batch.set_offset(topic, partition, offset + 1)
        batch.commit()
        return outputs

    def read(self, tick: Tick) -> list[EncodedOutput]:
        """``tick`` read back where it landed, as its writer wrote it."""
        headers: list[tuple[str, bytes | None]] = [*self.writer.headers(tick)]
        return self.send(tick.key, 0, partition=tick.partition, headers=headers)

    def armed(self, key: bytes, at_ms: int) -> None:
        """A record of ``key``, and the tick written for it (its quiet timer, set at the
        record, counts from the first tick after it), read back."""
        self.send(key, at_ms)
        ticks = self.decide()
        assert [t.partition for t in ticks] == [self.home(key)]
        self.read(ticks[0])

    def decide(self, *, after: float = 0.0) -> list[Tick]:
        """Let ``after`` seconds pass, then decide (with a batch that read nothing)."""
        self.clock.now += after
        batch = self.database.begin()
        try:
            return self.writer.decide(batch, {})
        finally:
            batch.abort()


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


@pytest.mark.parametrize(
    ("read", "quiet", "idle", "expected"),
    [
        (None, 0, None, NO_FLOOR),  # nothing read yet: a floor that moves no key
        (5_000, 10_000, None, 5_000),  # without idle_after: only what was read
        (5_000, 999, 1_000, 5_000),  # not quiet for long enough yet
        (5_000, 1_000, 1_000, 99_000),  # quiet: the wall clock less idle_after
        (None, 1_000, 1_000, 99_000),
        (99_500, 1_000, 1_000, 99_500),  # never below what was read
    ],
)
def test_the_floor(read: int | None, quiet: int, idle: int | None, expected: int) -> None:
    assert tick_floor(read, quiet, idle, 100_000) == expected


def test_a_partition_is_ticked_only_when_a_key_living_there_is_due() -> None:
    world = _World()
    key = b"a"
    world.send(key, _ms(NOW) - 200)
    world.send(key, _ms(NOW))  # its quiet timer waits for a tick to count from
    [anchor] = world.decide()  # so the key is due: a tick at once
    assert anchor == Tick(TOPIC, world.home(key), _ms(NOW), _ms(NOW), None, 0)
    world.read(anchor)  # the quiet timer: due at NOW + GAP
    assert world.decide(after=1.0) == []  # nothing due yet
    assert world.decide(after=GAP_MS / 1000 - 1.01) == []
    ticks = world.decide(after=1.0)
    wall = _ms(NOW + GAP_MS / 1000 + 0.99)
    # only its partition; floor: the largest event time read there; wall: the clock; the
    # steps of the topic's history the processor's view holds (none: it never changed)
    assert ticks == [Tick(TOPIC, world.home(key), _ms(NOW), wall, None, 0)]


def test_at_most_one_look_per_interval() -> None:
    world = _World()
    world.send(b"a", _ms(NOW))
    assert len(world.decide(after=GAP_MS / 1000)) == 1
    assert world.decide(after=0.5) == []  # considered half a second ago
    assert len(world.decide(after=0.5)) == 1  # (not sent: nothing to wait for)


def test_the_tick_read_back_makes_it_happen_and_nothing_is_due_after() -> None:
    world = _World()
    key = b"a"
    world.armed(key, _ms(NOW))
    [tick] = world.decide(after=GAP_MS / 1000)
    outputs = world.send(None, 0, partition=tick.partition, headers=[*tick_headers(0, tick.wall)])
    assert [orjson.loads(o.value or b"") for o in outputs] == [{"alert": "a", "events": 1}]
    assert world.decide(after=1.0) == []  # the session's window is not due: no idle_after


def test_idle_after_moves_a_quiet_partitions_floor_with_the_wall_clock() -> None:
    world = _World(idle=0.5)
    key = b"a"
    start = _ms(NOW)
    world.armed(key, start)  # the partition is looked at: quiet from now on
    [tick] = world.decide(after=GAP_MS / 1000)  # the quiet timer is due
    assert tick.floor == _ms(NOW + GAP_MS / 1000) - 500  # quiet: the wall clock less 0.5 s
    read = world.send(
        None, 0, partition=tick.partition, headers=[*tick_headers(tick.floor, tick.wall)]
    )
    # its floor is short of the session's end (start + GAP): only the alert
    assert [orjson.loads(o.value or b"") for o in read] == [{"alert": "a", "events": 1}]
    [closing] = world.decide(after=1.0)
    assert closing.floor == _ms(world.clock.now) - 500 >= start + GAP_MS
    read = world.send(
        None, 0, partition=tick.partition, headers=[*tick_headers(closing.floor, closing.wall)]
    )
    assert [orjson.loads(o.value or b"") for o in read] == [
        {"start": start, "end": start, "value": 1}
    ]
    assert world.decide(after=1.0) == []  # nothing of the key is due any more


def test_records_keep_a_partition_from_being_quiet() -> None:
    world = _World(idle=0.5)
    other = next(k for k in (b"b%d" % i for i in range(100)) if world.home(k) == world.home(b"a"))
    world.send(b"a", _ms(NOW))
    for step in range(1, 4):  # a record of another key of the partition every 0.4 s
        world.clock.now = NOW + 0.4 * step
        world.send(other, _ms(NOW))  # (its event time stays: only the wall clock moves)
        world.decide()
    world.clock.now = NOW + 1.6
    ticks = world.decide()  # a's timer waits for a tick; its partition never was quiet 0.5 s
    assert [(t.floor, t.wall) for t in ticks] == [(_ms(NOW), _ms(NOW + 1.6))]


def test_no_tick_where_the_processor_rebuilds_or_does_not_read() -> None:
    world = _World()
    world.send(b"a", _ms(NOW))
    position = (TOPIC, world.home(b"a"))
    world.reading.restore_below[position] = 5  # rebuilt up to 5: restore mode, no tick
    assert world.decide(after=2.0) == []
    world.reading.restore_below[position] = 1  # rebuilt: read live
    assert len(world.decide(after=1.0)) == 1
    world.reading.flowing.discard(position)  # released, or held by an ordering gate
    assert world.decide(after=1.0) == []


def test_no_tick_in_a_partition_a_shrink_deleted() -> None:
    grown = TopicHistory.of(TOPIC, [2]).grown(4, {2: 0, 3: 0}).with_markers({2: 0, 3: 0})
    world = _World(2, history=grown)
    key = next(k for k in (b"k%d" % i for i in range(100)) if bucket(key_hash(k), 2, 4) == 3)
    batch = world.database.begin()  # 0 and 1 were read past the growth's markers
    batch.set_offset(TOPIC, 0, 1)
    batch.set_offset(TOPIC, 1, 1)
    batch.commit()
    world.send(key, _ms(NOW), partition=3)
    assert [t.partition for t in world.decide(after=2.0)] == [3]  # (its timer is due)
    # the input shrinks back to 2 partitions: 3 is deleted, never ticked again
    shrunk = grown.shrunk(2, {0: 5, 1: 5})
    world.reading.layout.inputs[TOPIC] = TopicEntry(shrunk)
    assert world.decide(after=2.0) == []


def test_after_a_restart_the_floor_is_what_committed_batches_read_else_unknown() -> None:
    """A restarted processor ticks from the floor its state holds (``FLOOR_SCOPE``); a state
    without one (rebuilt from another processor's snapshot, say) knows none until a record
    or a tick is read: ``NO_FLOOR``, which moves no key's time."""
    world = _World()
    world.send(b"a", _ms(NOW))
    position = (TOPIC, world.home(b"a"))
    assert world.database.progress(FLOOR_SCOPE) == {position: _ms(NOW)}
    for lost in (False, True):
        if lost:
            batch = world.database.begin()
            batch.clear_progress(FLOOR_SCOPE, *position)
            batch.commit()
        # a new processor over the same state
        restarted = RecordProcessor(app, {TOPIC: 2})
        reading, database, clock = world.reading, world.database, world.clock
        writer = TickWriter.of(app.config.time, restarted, reading, database, clock)
        assert writer is not None
        world.clock.now += 2.0
        batch = world.database.begin()
        [tick] = writer.decide(batch, {})
        batch.abort()
        assert (tick.floor, tick.wall) == (NO_FLOOR if lost else _ms(NOW), _ms(world.clock.now))


def test_a_compacted_topics_tick_has_a_key_that_is_read_as_a_tick() -> None:
    world = _World(compacted=True)
    world.armed(b"a", _ms(NOW))
    [tick] = world.decide(after=2.0)
    assert tick.key is not None and is_tick_key(TOPIC, tick.key)
    assert tick.key.startswith(b"events/splitstate.tick/")
    # read with a key that linear hashing places elsewhere: no placement dead letter (nor a
    # marker's check): a tick
    key = next(
        k for k in (tick_key(TOPIC, str(i)) for i in range(100)) if world.home(k) != tick.partition
    )
    headers: list[tuple[str, bytes | None]] = [*tick_headers(tick.floor, tick.wall)]
    outputs = world.send(key, 0, partition=tick.partition, headers=headers)
    assert [orjson.loads(o.value or b"") for o in outputs] == [{"alert": "a", "events": 1}]
    # a keyed record of another key with the header is an ordinary record
    stray = world.send(b"b", _ms(NOW), headers=[(TICK_HEADER, b"{}")])
    assert stray == [] and world.database.get("events", b"b") == 1


@pytest.mark.integration
def test_no_tick_while_an_earlier_one_is_unread(
    kafka_bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    """On a real topic: the tick written is waited for until the processor read past it
    (or it is known lost); only then may another one follow."""
    topic = topic_factory(partitions=2)
    world = _World(topic=topic)
    partition = world.home(b"a")
    kafka = Clients({"bootstrap.servers": kafka_bootstrap})
    producer = kafka.producer()
    try:
        producer.produce(topic, b"", b"a", partition)  # the event at offset 0, as processed
        assert producer.flush(30) == 0
        world.send(b"a", _ms(NOW), partition=partition)
        [tick] = world.decide(after=2.0)
        world.writer.write(producer, [tick], transactional=False)  # lands at offset 1
        assert world.decide(after=1.0) == []  # still due, but the tick is unread
        batch = world.database.begin()
        batch.set_offset(topic, partition, 2)  # read past it (as if it changed nothing)
        batch.commit()
        [again] = world.decide(after=1.0)
        world.writer.send(producer, [again])  # handed over, not reported yet
        assert world.decide(after=1.0) == []
        world.writer.dropped()  # e.g. its transaction aborted: nothing to wait for
        assert len(world.decide(after=1.0)) == 1
        assert producer.flush(30) == 0
    finally:
        producer.close()
        kafka.close()


@pytest.mark.integration
def test_a_tick_to_a_partition_a_growth_just_added(
    kafka_bootstrap: str, topic_factory: Callable[..., str], kafka_admin: AdminClient
) -> None:
    """The processor reads a partition a growth added before its producer's metadata has it
    (librdkafka refuses such a record at once): the tick goes there once the producer read
    the topic's partitions again (was: the refusal stopped the processor)."""
    topic = topic_factory(partitions=2)
    world = _World(topic=topic)
    kafka = Clients({"bootstrap.servers": kafka_bootstrap})
    producer = kafka.producer()
    try:
        producer.produce(topic, b"", b"a", 1)  # its metadata: 2 partitions
        assert producer.flush(30) == 0
        kafka_admin.create_partitions([NewPartitions(topic, 4)])[topic].result(30)
        tick = Tick(topic, 3, 1_000, 2_000)
        world.writer.write(producer, [tick], transactional=False)
        assert world.writer.written == 1
    finally:
        producer.close()
        kafka.close()
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": "ticks-grown"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 3), timeout=30)
    finally:
        consumer.close()
    assert (low, high) == (0, 1)


class _Unflushed:
    """A producer whose flush leaves ``remaining`` records unsent."""

    def __init__(self, remaining: int) -> None:
        self.remaining = remaining

    def flush(self, timeout: float) -> int:
        return self.remaining


@pytest.mark.parametrize("transactional", [True, False])
def test_ticks_not_written_raise_and_are_dropped(transactional: bool) -> None:
    """The tick writer's and the forced ticks' one write path (``write_ticks``): a tick left
    unsent or refused raises (aborting the transaction inside one) after ``failed`` ran."""
    dropped: list[bool] = []
    expected = TransactionAbortableError if transactional else SplitstateError

    def refuse(report: Callable[[DeliveryError | None, Any], None]) -> None:
        report(DeliveryError("refused", "refused"), None)

    with pytest.raises(expected, match="forced ticks could not be written"):
        write_ticks(
            cast(KafkaProducer, _Unflushed(0)),
            refuse,
            "forced ticks",
            transactional,
            failed=lambda: dropped.append(True),
        )
    assert dropped == [True]
    with pytest.raises(expected, match=r"ticks could not be written \(2 unsent"):
        write_ticks(cast(KafkaProducer, _Unflushed(2)), lambda report: None, "ticks", transactional)
    write_ticks(cast(KafkaProducer, _Unflushed(0)), lambda report: None, "ticks", transactional)
