"""An upstream app's exactly-once outputs written into the simulated app's input.

The README allows an input that is another app's exactly-once output. Such a writer places
keys as a processor places its outputs (linear hashing under a registry lease,
``produce_placed``) and writes them in Kafka transactions, some of which abort: its records
take offsets whether their transaction commits or not, and so do the markers that end
them. ``UpstreamProducer`` is that writer; ``start_upstream`` runs one in a world.
"""

from __future__ import annotations

from framework.coordination.registry import TopicRegistry
from framework.errors import SplitstateError
from framework.growth.lease import RegistryLease
from framework.growth.placement import LinearHashPartitioner, produce_placed
from framework.kafka import KafkaIOError, TransactionalProducer
from tests.sim.app import INPUT
from tests.sim.kafka import MemoryKafka
from tests.sim.scheduler import Party
from tests.sim.world import World

__all__ = ["TRANSACTION_TIMEOUT_MS", "UpstreamProducer", "start_upstream"]

#: the upstream producer's ``transaction.timeout.ms``: a transaction it left open (killed)
#: holds the input's readers back this long
TRANSACTION_TIMEOUT_MS = 10_000

#: how long a commit or an abort may take
_SECONDS = 30.0


class UpstreamProducer:
    """A transactional producer of the input under a registry lease, through ``port``."""

    def __init__(self, port: MemoryKafka, transactional_id: str) -> None:
        registry = TopicRegistry(port)
        read_at = port.clock.monotonic()  # the lease runs from before the registry read
        entries = registry.read()
        self.lease = RegistryLease(registry, {INPUT: entries[INPUT]}, port.clock, read_at=read_at)
        self.producer: TransactionalProducer = port.transactional_producer(
            transactional_id,
            linger_ms=5,
            delivery_timeout_ms=self.lease.delivery_timeout_ms,
            settings={"transaction.timeout.ms": TRANSACTION_TIMEOUT_MS},
        )
        self.lease.start(self.producer)

    def _placed(self) -> LinearHashPartitioner:
        self.lease.check()
        return self.lease.partitioner

    def write(self, records: list[tuple[bytes, bytes]], commit: bool) -> None:
        """One transaction of ``records`` (key, value), then its commit or its abort.
        ``KafkaIOError`` (or the lease's ``SplitstateError``) when it could not: the caller
        makes a new producer, which aborts what this one left open."""
        self.producer.begin()
        for key, value in records:
            produce_placed(self.producer, self._placed, INPUT, key, value)
        if commit:
            self.producer.commit(_SECONDS)
        else:
            self.producer.flush(_SECONDS)  # every record takes its offset, then the abort
            self.producer.abort(_SECONDS)

    def close(self) -> None:
        """Stop the lease's renewer; let go of the producer."""
        self.lease.close()
        self.producer.close()


def open_upstream(port: MemoryKafka, transactional_id: str) -> UpstreamProducer:
    """An ``UpstreamProducer``, made again while the broker fails the reads it needs."""
    while True:
        try:
            return UpstreamProducer(port, transactional_id)
        except KafkaIOError:
            port.clock.sleep(0.5)


def start_upstream(world: World, records: int) -> None:
    """An upstream app in ``world`` writing ``records`` records in transactions of 1-4,
    each aborted at the plan's ``abort_rate``, then up to as many more, slowly, while the
    operator's plan or a scale is still under way. The plan's aborted partition's keys are
    written only in aborted transactions, one time in two all of them (a stretch of that
    partition holding only aborted records and their marker)."""
    name, rng = world.producer_name("u")
    committed, aborted = world.committed_keys(), world.aborted_keys()
    abort_rate = world.plan.abort_rate
    clock = world.clock

    def body(port: MemoryKafka, _party: Party) -> None:
        upstream = open_upstream(port, f"upstream-{name}")
        seqs: dict[bytes, int] = {}
        written = 0
        while written < 2 * records:
            if written >= records:
                if not world.operating():
                    break
                clock.sleep(rng.uniform(0.2, 1.0))
            commit = rng.random() >= abort_rate
            keys = aborted if not commit and aborted and rng.random() < 0.5 else committed
            batch = []
            for _ in range(rng.randint(1, 4)):
                key = rng.choice(keys)
                seqs[key] = seqs.get(key, 0) + 1
                batch.append((key, f"{name}:{seqs[key]}".encode()))
            written += len(batch)
            try:
                upstream.write(batch, commit)
            except (KafkaIOError, SplitstateError):
                # a new producer of the transactional id aborts what this one left open
                upstream.close()
                clock.sleep(0.5)
                upstream = open_upstream(port, f"upstream-{name}")
            if rng.random() < 0.5:
                clock.sleep(rng.uniform(0.0, 0.4))
        upstream.close()

    world.producers.append(world.spawn(name, body))
