"""A receiver completes a handoff only once the ancestors of its partitions were read to their
thresholds, also an ancestor that is another handoff's partition (simulation seed 63): 8 -> 2
after a growth 4 -> 8 gives processor 0 partition 2 (from 2) and its child 6 (from 6)."""

from __future__ import annotations

import random
from pathlib import Path

from framework import App, AppConfig, KafkaConfig, KeyState, Record
from framework.config import TopicConfig
from framework.kafka import TopicSpec
from framework.processing import RecordProcessor
from framework.runtime.catchup import CatchUp
from rebalance import HandoffEvent, bucket, key_hash
from rebalance.control import ControlState, handoff_record
from statestore import DatabaseIdentity, ProcessorDatabase, StoreSpec
from tests.clocks import ManualClock
from tests.framework.test_catchup_crashes import TOPIC, started
from tests.framework.test_moved_keys import all_completed
from tests.sim.broker import Broker
from tests.sim.kafka import MemoryKafka

HISTORY = {"counts": [4, 8], "thresholds": {"4": 0, "5": 0, "6": 3, "7": 0}}


def counting_app(tmp_path: Path) -> App:
    app = App(
        AppConfig(
            app_id="grown",
            kafka=KafkaConfig(bootstrap_servers="simulated:9092"),
            inputs=[TopicConfig(topic=TOPIC, partitions=4)],
            initial_processors=2,
            state_dir=tmp_path,
        )
    )
    app.store("counts")

    @app.processor()
    def count(_record: Record[bytes | None], state: KeyState[int]) -> None:
        state.set((state.get() or 0) + 1)

    return app


def scaled(state: ControlState, generation: int, processors: int) -> ControlState:
    record = {
        "type": "scale",
        "generation": generation,
        "processors": processors,
        "partitions": {TOPIC: 8},
        "histories": {TOPIC: HISTORY},
    }
    return state.apply(record)


def eight_to_two() -> ControlState:
    state = started("grown", 2, 4)
    state = scaled(all_completed(scaled(state, 1, 8)), 2, 2)
    assert state.scaling is not None, state.ignored
    return state


def test_a_handoff_waits_for_its_ancestor_that_another_handoff_brings(tmp_path: Path) -> None:
    kafka = MemoryKafka(Broker(random.Random(0)), ManualClock())
    kafka.create_topics([TopicSpec(TOPIC, 8)])
    key = next(k for k in (f"k{i}".encode() for i in range(200)) if bucket(key_hash(k), 4, 8) == 6)
    for offset in range(3):  # the key's records before the growth, in the parent
        record = {"key": key, "value": b"v", "headers": (), "timestamp_ms": 0, "origin": "t"}
        assert kafka.broker.append((TOPIC, 2), record).offset == offset
    kafka.broker.groups["grown"] = {(TOPIC, 2): 0, (TOPIC, 4): 0, (TOPIC, 6): 0}
    state = eight_to_two()
    for source in (2, 4, 6):
        for event in (HandoffEvent.START_CATCH_UP, HandoffEvent.CAUGHT_UP):
            state = state.apply(handoff_record(2, source, 0, event))
    state = state.apply(handoff_record(2, 6, 0, HandoffEvent.RELEASE, {(TOPIC, 6): 0}))
    assert state.scaling is not None
    child = state.scaling.handoffs[(6, 0)]
    database = ProcessorDatabase.in_memory(
        DatabaseIdentity("grown", 0, {"initial_processors": 2}), [StoreSpec("counts")]
    )
    catchup = CatchUp(
        0,
        2,
        state.scaling,
        kafka=kafka,
        group_id="grown",
        database=database,
        records=RecordProcessor(counting_app(tmp_path)),
    )
    catchup.release(child)
    catchup.step(10)
    # partition 2's owner has committed nothing yet: the key's 3 records are not read
    assert catchup.positions[(TOPIC, 2)] == 0
    assert not catchup.finished(child) and not catchup.caught_up(child, 0)
    kafka.broker.groups["grown"][(TOPIC, 2)] = 3
    catchup.refresh(force=True)
    while catchup.step(10):
        pass
    assert catchup.positions[(TOPIC, 2)] == 3
    assert catchup.finished(child)
    batch = database.begin()
    assert batch.store("counts").get(key) == 3
    batch.abort()
