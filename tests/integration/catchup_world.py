"""A small world for driving ``CatchUp`` against the real broker: one input topic, a
counting app, a control state built from control records, and the truth per key.

The tests play every other party by hand: the old owners' commits (the group's offsets),
the receiver's live processing after it took partitions over, and the control records.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from framework import App, AppConfig, Output, Record
from framework.kafka import Clients
from framework.processing import RecordProcessor
from framework.runtime.catchup import CatchUp
from rebalance import HandoffEvent, TopicHistory, bucket, key_hash
from rebalance.control import ControlState, Handoff, handoff_record
from rebalance.positions import Position
from statestore import DatabaseIdentity, KeyState, ProcessorDatabase
from tests.integration.harness import consume_ready


def counting_app(kafka: str, topic: str, partitions: int, initial_processors: int) -> App:
    """An app counting records per key (no outputs)."""
    config = AppConfig.model_validate(
        {
            "app_id": f"catchup-{uuid.uuid4().hex[:8]}",
            "kafka": {"bootstrap_servers": kafka},
            "inputs": [{"topic": topic, "partitions": partitions}],
            "initial_processors": initial_processors,
            # this world drives the replay catch-up (snapshots: tests/integration/test_snapshots)
            "bootstrap": "replay",
        }
    )
    app = App(config)
    app.store("counts")

    @app.processor()
    def count(record: Record[bytes | None], state: KeyState[int]) -> Output | None:
        state.set((state.get() or 0) + 1)
        return None

    return app


class World:
    """One input topic (created with its final partition count), an app, the truth."""

    def __init__(
        self, kafka: str, admin: AdminClient, partitions: int, initial: int, b: int
    ) -> None:
        self.kafka = kafka
        self.topic = f"catchup-{uuid.uuid4().hex[:10]}"
        admin.create_topics([NewTopic(self.topic, num_partitions=partitions)])[self.topic].result(
            timeout=30
        )
        self.initial = initial
        self.counts = [initial]
        self.thresholds: dict[int, int] = {}
        self.b = b
        self.app = counting_app(kafka, self.topic, partitions, b)
        self.truth: Counter[bytes] = Counter()
        self.ends: Counter[int] = Counter()
        self._producer = Producer({"bootstrap.servers": kafka, "enable.idempotence": True})
        self._group = Consumer({"bootstrap.servers": kafka, "group.id": self.app.config.app_id})

    @property
    def history(self) -> TopicHistory:
        """The input's partition history as the registry would hold it."""
        return TopicHistory.of(self.topic, self.counts, self.thresholds)

    def produce(self, keys: Iterable[bytes]) -> None:
        """Write one record per key, placed with the current count (as producers do)."""
        count = self.counts[-1]
        for key in keys:
            partition = bucket(key_hash(key), self.initial, count)
            self._producer.produce(self.topic, key=key, value=b"x", partition=partition)
            self.truth[key] += 1
            self.ends[partition] += 1
        assert self._producer.flush(30) == 0

    def grow(self, count: int) -> None:
        """Record a growth: each new partition's threshold is its parent's end now."""
        history = TopicHistory.of(self.topic, [*self.counts, count])
        for child in range(self.counts[-1], count):
            gate = history.gate(child)
            assert gate is not None
            self.thresholds[child] = self.ends[gate[0]]
        self.counts.append(count)

    def commit_group(self, offsets: Mapping[int, int]) -> None:
        """Commit the app's group offsets (T1) as the owners would."""
        self._group.commit(
            offsets=[TopicPartition(self.topic, p, o) for p, o in offsets.items()],
            asynchronous=False,
        )

    def database(self, processor: int) -> ProcessorDatabase:
        """An empty in-memory database of ``processor``."""
        return ProcessorDatabase.in_memory(
            DatabaseIdentity(self.app.config.app_id, processor, {"initial_processors": self.b}),
            self.app.store_specs(),
        )

    def seed_state(
        self, database: ProcessorDatabase, owns: Callable[[bytes], bool], partitions: set[int]
    ) -> None:
        """Give ``database`` the true counts of the keys it owns, and the ends of
        ``partitions`` as its input offsets (as if it had processed everything)."""
        batch = database.begin()
        store = batch.store("counts")
        for key, n in self.truth.items():
            if owns(key):
                store.set(key, n)
        for partition in partitions:
            batch.set_offset(self.topic, partition, self.ends[partition])
        batch.commit()

    def process_live(self, database: ProcessorDatabase, partition: int, start: int) -> int:
        """Apply ``partition``'s records from ``start`` to its end with the app (as the
        runtime of its owner does), commit state, offsets and the group offset."""
        consumer = Consumer(
            {"bootstrap.servers": self.kafka, "group.id": f"live-{uuid.uuid4().hex[:8]}"}
        )
        consumer.assign([TopicPartition(self.topic, partition, start)])
        records = RecordProcessor(self.app)
        batch = database.begin()
        position, end = start, self.ends[partition]
        deadline = time.monotonic() + 30
        while position < end and time.monotonic() < deadline:
            for message in consume_ready(consumer, 100, 0.5):
                if message.error() is not None:
                    continue
                offset = message.offset()
                assert offset is not None
                records.process(batch, message)
                position = offset + 1
        consumer.close()
        assert position == end, (position, end)
        batch.set_offset(self.topic, partition, end)
        batch.commit()
        self.commit_group({partition: end})
        return end

    def control(self, old: int, new: int) -> ControlState:
        """A control state at ``old`` processors with a scale to ``new`` just started."""
        state = ControlState()
        definition: dict[str, Any] = {
            "type": "app",
            "app_id": self.app.config.app_id,
            "initial_processors": self.b,
            "inputs": {self.topic: self.initial},
            "key_hash": "murmur3",
        }
        for record in (
            definition,
            {"type": "generation", "generation": 0, "processors": old},
            {
                "type": "scale",
                "generation": 1,
                "processors": new,
                "partitions": {self.topic: self.counts[-1]},
                "histories": {
                    self.topic: {
                        "counts": self.counts,
                        "thresholds": {str(c): o for c, o in self.thresholds.items()},
                    }
                },
            },
        ):
            state = state.apply(record)
        assert state.scale is not None, state.ignored
        return state

    def catch_up(self, processor: int, state: ControlState, database: ProcessorDatabase) -> CatchUp:
        """A receiver's catch-up for the scale in progress."""
        scale = state.scaling
        assert scale is not None
        return CatchUp(
            processor,
            self.b,
            scale,
            kafka=Clients({"bootstrap.servers": self.kafka}),
            group_id=self.app.config.app_id,
            database=database,
            records=RecordProcessor(self.app),
            histories={self.topic: self.history},
        )

    def state(self, database: ProcessorDatabase, keys: Iterable[bytes]) -> dict[bytes, int]:
        """The counts ``database`` holds for ``keys``."""
        batch = database.begin()
        store = batch.store("counts")
        values = {key: store.get(key, 0) for key in keys}
        batch.abort()
        return values


def send(state: ControlState, source: int, target: int, *events: HandoffEvent) -> ControlState:
    """Apply handoff events of generation 1 (RELEASE takes F from the group's T1 later)."""
    for event in events:
        state = state.apply(handoff_record(1, source, target, event))
    return state


def release(
    state: ControlState, source: int, target: int, final: Mapping[Position, int]
) -> ControlState:
    """Apply RELEASE with offsets F."""
    state = state.apply(handoff_record(1, source, target, HandoffEvent.RELEASE, final))
    assert handoff(state, source, target).released, state.ignored
    return state


def drive(catchup: CatchUp, done: Callable[[], bool], seconds: float = 60) -> None:
    """Step ``catchup`` until ``done()``."""
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, f"catch-up stuck at {catchup.positions}"
        catchup.step(1000, timeout=0.1)


def hand_over(
    state: ControlState,
    catchup: CatchUp,
    source: int,
    target: int,
    final: Mapping[Position, int],
) -> ControlState:
    """Play one handoff from CATCHING_UP to taken over: catch up, CAUGHT_UP, RELEASE at
    ``final``, finish to F, complete (the COMPLETE record is the caller's to write)."""
    drive(catchup, lambda: catchup.caught_up(handoff(state, source, target), 0))
    state = release(send(state, source, target, HandoffEvent.CAUGHT_UP), source, target, final)
    catchup.release(handoff(state, source, target))
    drive(catchup, lambda: catchup.finished(handoff(state, source, target)))
    catchup.complete(handoff(state, source, target))
    return state


def settle(catchup: CatchUp, quiet_steps: int = 5) -> None:
    """Step ``catchup`` until it reads nothing more (whatever it may still read, it has)."""
    quiet = 0
    while quiet < quiet_steps:
        quiet = quiet + 1 if catchup.step(1000, timeout=0.2) == 0 else 0


def handoff(state: ControlState, source: int, target: int) -> Handoff:
    """The handoff ``source -> target`` of the scale in ``state``."""
    assert state.scale is not None
    return state.scale.handoffs[(source, target)]
