"""A receiver's catch-up judges each record's placement as the old owner's live loop did: a
record without the count header that no partition count places where it is was a dead letter
there, so the catch-up skips it too, and the receiver's state of every key it gains equals
the old owner's (before the fix it applied them: the key's state differed between the two)."""

from __future__ import annotations

import random
from pathlib import Path

from framework import App, AppConfig, KafkaConfig, KeyState, Record
from framework.config import TopicConfig
from framework.growth.placement import COUNT_HEADER
from framework.kafka import TopicSpec
from framework.processing import RecordProcessor, StoredMessage
from framework.runtime.catchup import CatchUp
from rebalance import TopicHistory, bucket, key_hash
from rebalance.control import Scale
from statestore import DatabaseIdentity, ProcessorDatabase, StoreSpec
from statestore.key_layout import KeyLayout
from tests.clocks import ManualClock
from tests.framework.test_catchup_crashes import TOPIC, started
from tests.sim.broker import Broker
from tests.sim.kafka import MemoryKafka

N = 4  # input partitions; one processor at first (B = 1), scaled to 2: 1 and 3 move

#: the control record of generation 1: processor 0 of 1 gives partitions 1 and 3 to 1
SCALE = {
    "type": "scale",
    "generation": 1,
    "processors": 2,
    "partitions": {TOPIC: N},
    "histories": {TOPIC: {"counts": [N], "thresholds": {}}},
}


def counting_app(tmp_path: Path) -> App:
    app = App(
        AppConfig(
            app_id="placed",
            kafka=KafkaConfig(bootstrap_servers="simulated:9092"),
            inputs=[TopicConfig(topic=TOPIC, partitions=N)],
            initial_processors=1,
            state_dir=tmp_path,
        )
    )
    app.store("counts")

    @app.processor()
    def count(_record: Record[bytes | None], state: KeyState[int]) -> None:
        state.set((state.get() or 0) + 1)

    return app


def records_as_loops_build_them(app: App) -> RecordProcessor:
    """A ``RecordProcessor`` made as ``ProcessorRuntime`` makes its own (from the registry)."""
    return RecordProcessor(app, {TOPIC: N}, histories={TOPIC: TopicHistory.of(TOPIC, [N])})


def database(processor: int) -> ProcessorDatabase:
    identity = DatabaseIdentity("placed", processor, {"initial_processors": 1})
    return ProcessorDatabase.in_memory(identity, [StoreSpec("counts")])


def write_input(kafka: MemoryKafka, rng: random.Random) -> set[tuple[int, int]]:
    """Records of 40 keys: most where linear hashing places them (with the count header or
    without), some without the header on another partition, as Kafka's default partitioner
    writes them; returns where those are (partition, offset)."""
    keys = [f"user-{i}".encode() for i in range(40)]
    misplaced: set[tuple[int, int]] = set()
    for _ in range(600):
        key = rng.choice(keys)
        home = bucket(key_hash(key), N, N)
        roll = rng.random()
        partition = rng.choice([p for p in range(N) if p != home]) if roll < 0.2 else home
        headers = ((COUNT_HEADER, str(N).encode()),) if roll > 0.6 else ()
        record = {"key": key, "value": b"", "headers": headers, "timestamp_ms": 0, "origin": "t"}
        stored = kafka.broker.append((TOPIC, partition), record)
        if partition != home:
            misplaced.add((partition, stored.offset))
    return misplaced


def test_a_catch_up_skips_the_records_the_old_owner_dead_lettered(tmp_path: Path) -> None:
    app = counting_app(tmp_path)
    kafka = MemoryKafka(Broker(random.Random(0)), ManualClock())
    kafka.create_topics([TopicSpec(TOPIC, N)])
    misplaced = write_input(kafka, random.Random(4))
    ends = {p: kafka.broker.partition((TOPIC, p)).end for p in range(N)}

    # processor 0 processed everything live, as its loop does, before the scale
    old_owner, live = database(0), records_as_loops_build_them(app)
    batch = old_owner.begin()
    dead = set()
    for p in range(N):
        for stored in kafka.broker.records(TOPIC, p):
            message = StoredMessage(
                TOPIC, p, stored.offset, stored.key, stored.value, 0, list(stored.headers)
            )
            _outputs, letter = live.process(batch, message)
            if letter is not None:
                assert letter.stage == "placement", letter
                dead.add((letter.partition, letter.offset))
    batch.commit()
    assert dead == misplaced and misplaced
    kafka.broker.groups["placed"] = {(TOPIC, p): end for p, end in ends.items()}  # T1

    state = started("placed", 1, N).apply(SCALE)
    assert isinstance(state.scaling, Scale), state.ignored
    receiver = database(1)
    catchup = CatchUp(
        1,
        1,
        state.scaling,
        kafka=kafka,
        group_id="placed",
        database=receiver,
        records=records_as_loops_build_them(app),
    )
    while catchup.step(50):
        pass
    assert catchup.positions == {(TOPIC, 1): ends[1], (TOPIC, 3): ends[3]}

    old = dict(old_owner.backend.scan("counts"))  # keys as stored (prefixed by their bucket)
    gained = {key for key in old if bucket(key_hash(KeyLayout(1).user(key)), 1, 2) == 1}
    assert gained
    assert dict(receiver.backend.scan("counts")) == {key: old[key] for key in gained}
