"""The producers of a simulated world's input: per-key sequences over the plan's keys, now and
then a special record (poison, huge, killer) or, for a compacted input, a delete.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework.clock import Clock
from framework.errors import SplitstateError
from framework.kafka import KafkaIOError
from framework.producer import SplitstateProducer
from tests.sim.app import DELETE_HEADER, HUGE, INPUT, KILLER, POISON
from tests.sim.kafka import MemoryKafka
from tests.sim.scheduler import Party

if TYPE_CHECKING:
    from tests.sim.world import World

__all__ = ["DELETE_RATE", "start_producer"]

#: the chance that a plain record of a plan with a compacted input is a delete
DELETE_RATE = 0.1


def start_producer(world: World, records: int) -> None:
    """A producer writing ``records`` records over the plan's keys, then up to as many
    more, slowly, while the operator's plan or a scale is still under way (live records
    during the handoffs)."""
    name, rng = world.producer_name("p")
    keys = world.committed_keys()
    kinds = [POISON, POISON, HUGE, HUGE, KILLER] if world.plan.killers else [POISON, HUGE]
    if not world.plan.outputs:  # a huge record's output is what makes it special
        kinds = [kind for kind in kinds if kind != HUGE]

    def body(port: MemoryKafka, _party: Party) -> None:
        producer = _open_producer(port, world.clock)
        seqs: dict[bytes, int] = {}
        for written in range(2 * records):
            if written >= records:
                if not world.operating():
                    break
                world.clock.sleep(rng.uniform(0.2, 1.0))
            key = rng.choice(keys)
            seqs[key] = seqs.get(key, 0) + 1
            kind = ""
            if world.plan.special_rate and rng.random() < world.plan.special_rate:
                kind = ":" + rng.choice(kinds)
            value: bytes | None = f"{name}:{seqs[key]}{kind}".encode()
            headers: list[tuple[str, str | bytes | None]] = []
            if world.plan.compacted and not kind and rng.random() < DELETE_RATE:
                headers = [(DELETE_HEADER, value)]  # a delete names itself
                value = None
            _produce_retrying(producer, key, value, world.clock, headers)
            world.produced += 1
            if rng.random() < 0.3:
                producer.flush(5)
            if rng.random() < 0.5:  # bursts: processors fall behind now and then
                world.clock.sleep(rng.uniform(0.0, 0.4))
        producer.close(5)

    world.producers.append(world.spawn(name, body))


def _open_producer(port: MemoryKafka, clock: Clock) -> SplitstateProducer:
    while True:
        try:
            return SplitstateProducer(port, [INPUT])
        except KafkaIOError:
            clock.sleep(0.5)


def _produce_retrying(
    producer: SplitstateProducer,
    key: bytes,
    value: bytes | None,
    clock: Clock,
    headers: list[tuple[str, str | bytes | None]],
) -> None:
    while True:
        try:
            producer.produce(INPUT, key, value, headers=headers or None)
            return
        except SplitstateError:  # the lease ran out (the registry was unreadable): wait
            clock.sleep(0.2)
