"""Ticks in a timed plan's input (``Plan.timed``), written by the simulation itself.

A tick (``framework.time.ticks``) is a keyless record in an input partition: the keys that
live in the partition at its offset and have something due by it take its event-time floor
and processing time, and every reader meets it at that offset. The ticker, one more producer
of the world (started again when killed), appends one every ``TICK_SECONDS`` to a partition
drawn from the seed, with floor ``ALLOWANCE_MS`` before its wall time; once the other
producers finished and no operator is at work, it appends a last round to every partition
``END_MS`` ahead, which closes every window and fires every timer. Each tick names the steps
of the input's partition history the registry holds when it is written (a processor's view
may be older; either may be older than where the tick lands: a shrink's hold is measured
before the registry records it). The processors write ticks of
their own beside these (``framework.runtime.ticking``).
"""

from __future__ import annotations

import random

from framework.coordination.registry import RegistryRecordError, TopicRegistry
from framework.kafka import KafkaIOError, KafkaProducer, TopicSpec
from framework.time.ticks import tick_headers
from tests.sim.app import INPUT
from tests.sim.event_times import event_delays
from tests.sim.kafka import MemoryKafka
from tests.sim.scheduler import Party
from tests.sim.timed_app import TIMED
from tests.sim.world import World

__all__ = ["ALLOWANCE_MS", "END_MS", "TICK_SECONDS", "start_ticker", "start_time"]

TICK_SECONDS = (0.2, 2.0)
ALLOWANCE_MS = 1_000
END_MS = 60_000
#: how long the ticker waits for the broker before it tries again
_RETRY_SECONDS = 0.5


def start_time(world: World) -> None:
    """What a timed plan adds to ``world`` before it runs: the topic of its time's outputs
    (``World.create_topics`` registered it), its records' event times, and the ticker."""
    world.driver.create_topics([TopicSpec(TIMED, 2)])
    world.broker.delay = event_delays(world.plan.seed)
    start_ticker(world)


def start_ticker(world: World, incarnation: int = 0) -> None:
    """The ticker of ``world`` (see the module), started after its producers; a killed one
    is started again (as the runtime's writer, a processor, would be)."""
    rng = random.Random(world.plan.seed * 53 + 5 + incarnation)
    clock = world.clock

    def body(port: MemoryKafka, party: Party) -> None:
        producer = _open(port)
        while any(p.runnable for p in world.producers if p is not party) or world.operating():
            clock.sleep(rng.uniform(*TICK_SECONDS))
            now = int(clock.time() * 1000)
            partition = rng.randrange(_partitions(port, producer))
            _tick(port, producer, partition, (now - ALLOWANCE_MS, now, _steps(world)))
        end = int(clock.time() * 1000) + END_MS
        for partition in range(_partitions(port, producer)):
            _tick(port, producer, partition, (end, end, _steps(world)))

    party = world.spawn("ticker", body)

    def again() -> None:
        if not world.scheduler.ended:
            start_ticker(world, incarnation + 1)

    party.on_kill.append(again)
    world.producers.append(party)


def _open(port: MemoryKafka) -> KafkaProducer:
    while True:
        try:
            return port.producer()
        except KafkaIOError:
            port.clock.sleep(_RETRY_SECONDS)


def _partitions(port: MemoryKafka, producer: KafkaProducer) -> int:
    """The input's partition count, as the producer's metadata has it (read again now)."""
    while True:
        try:
            return max(1, producer.partition_count(INPUT))
        except KafkaIOError:
            port.clock.sleep(_RETRY_SECONDS)


def _tick(
    port: MemoryKafka, producer: KafkaProducer, partition: int, tick: tuple[int, int, int | None]
) -> None:
    """Append a tick ``(floor, wall, steps)`` to ``partition``; retried until it is queued,
    then flushed (a tick that does not get there is one tick fewer, as when its writer
    dies)."""
    floor, wall, steps = tick
    headers = tick_headers(floor, wall, steps=steps)
    while True:
        try:
            producer.produce(INPUT, None, None, partition, headers=headers)
            break
        except (KafkaIOError, BufferError):
            port.clock.sleep(_RETRY_SECONDS)
            _flush(port, producer)  # (the queue may be full of delivery reports)
    _flush(port, producer)


def _steps(world: World) -> int | None:
    """How many steps of the input's partition history the registry holds now (read
    through the driver's port, which never fails nor waits: the schedule stays as it was;
    ``None``, no steps named, when its entry cannot be read)."""
    try:
        entry = TopicRegistry(world.driver).read().get(INPUT)
    except RegistryRecordError:
        return None
    return 0 if entry is None else len(entry.history.steps)


def _flush(port: MemoryKafka, producer: KafkaProducer) -> None:
    try:
        producer.flush(5)
    except KafkaIOError:
        port.clock.sleep(_RETRY_SECONDS)
