"""A record that kills the process kills a receiver's catch-up too (restore mode runs the same
function): after ``crash_limit`` deaths on it alone the catch-up skips it, as the old owner's
loop does, instead of restarting into it forever and never finishing the scale."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Literal

import pytest

from framework import App, AppConfig, KafkaConfig, KeyState, Record
from framework.config import TopicConfig
from framework.kafka import TopicSpec
from framework.processing import ProcessorStoppedError, RecordProcessor
from framework.runtime.catchup import CatchUp
from framework.runtime.crashes import skipped_records
from rebalance import bucket, key_hash
from rebalance.control import ControlState, Scale
from statestore import DatabaseIdentity, ProcessorDatabase, StoreSpec
from tests.clocks import ManualClock
from tests.sim.broker import Broker
from tests.sim.kafka import MemoryKafka

TOPIC = "in"


class Died(BaseException):
    """The process died while the function ran (what no ``except Exception`` catches)."""


def counting_app(tmp_path: Path, on_error: Literal["dead-letter", "stop"] = "dead-letter") -> App:
    app = App(
        AppConfig(
            app_id="crashy",
            kafka=KafkaConfig(bootstrap_servers="simulated:9092"),
            inputs=[TopicConfig(topic=TOPIC, partitions=2)],
            initial_processors=1,
            state_dir=tmp_path,
            on_error=on_error,
        )
    )
    app.store("counts")

    @app.processor()
    def count(record: Record[bytes | None], state: KeyState[int]) -> None:
        if record.value == b"killer":
            raise Died(f"{TOPIC}[{record.partition}]@{record.offset}")
        state.set((state.get() or 0) + 1)

    return app


def started(app_id: str, initial: int, partitions: int) -> ControlState:
    """The control state of app ``app_id`` (``initial`` processors over ``partitions``
    partitions of ``TOPIC``) at its first generation."""
    state = ControlState()
    for record in (
        {
            "type": "app",
            "app_id": app_id,
            "initial_processors": initial,
            "inputs": {TOPIC: partitions},
            "key_hash": "murmur3",
        },
        {"type": "generation", "generation": 0, "processors": initial},
    ):
        state = state.apply(record)
    return state


#: the control record of generation 1: processor 0 of 1 gives partition 1 to processor 1
SCALE_1_TO_2 = {
    "type": "scale",
    "generation": 1,
    "processors": 2,
    "partitions": {TOPIC: 2},
    "histories": {TOPIC: {"counts": [2], "thresholds": {}}},
}


def scale_1_to_2() -> Scale:
    state = started("crashy", 1, 2).apply(SCALE_1_TO_2)
    assert state.scaling is not None, state.ignored
    return state.scaling


VALUES = [b"plain"] * 6 + [b"killer"] + [b"plain"] * 5


def killer_world() -> tuple[MemoryKafka, list[bytes]]:
    """Partition 1 (moving from processor 0 to 1) holding a record that kills the process."""
    kafka = MemoryKafka(Broker(random.Random(0)), ManualClock())
    kafka.create_topics([TopicSpec(TOPIC, 2)])
    keys = [k for k in (f"k{i}".encode() for i in range(40)) if bucket(key_hash(k), 2, 2) == 1]
    for i, value in enumerate(VALUES):
        kafka.broker.append(
            (TOPIC, 1),
            {
                "key": keys[i % 3],
                "value": value,
                "headers": (),
                "timestamp_ms": 0,
                "origin": "test",
            },
        )
    kafka.broker.groups["crashy"] = {(TOPIC, 1): len(VALUES)}  # T1: the old owner's commits
    return kafka, keys


def receiver(
    kafka: MemoryKafka,
    app: App,
    database: ProcessorDatabase,
    *,
    crash_limit: int = 3,
    read_ahead: int = 5000,
) -> CatchUp:
    """Processor 1's catch-up of ``SCALE_1_TO_2``."""
    records = RecordProcessor(app)
    return CatchUp(
        1, 1, scale_1_to_2(), kafka=kafka, group_id="crashy", database=database, records=records,
        crash_limit=crash_limit, read_ahead=read_ahead,
    )  # fmt: skip


def run_catch_ups(kafka: MemoryKafka, app: App, database: ProcessorDatabase) -> tuple[CatchUp, int]:
    """Catch up as processor 1, in a new process after each death; the last one and deaths."""
    deaths = 0
    for _run in range(10):
        catchup = receiver(kafka, app, database, crash_limit=2)
        try:
            while catchup.step(5):
                pass
        except Died:
            deaths += 1
            continue
        return catchup, deaths
    raise AssertionError("still dying after 10 runs")


def test_a_catch_up_skips_a_record_that_killed_it_crash_limit_times(tmp_path: Path) -> None:
    kafka, keys = killer_world()
    values = VALUES
    app = counting_app(tmp_path)
    database = ProcessorDatabase.in_memory(DatabaseIdentity("crashy", 1), [StoreSpec("counts")])
    catchup, deaths = run_catch_ups(kafka, app, database)
    assert catchup.positions[(TOPIC, 1)] == len(values)
    assert deaths == 3  # once amid a batch (counted against no record), then twice alone
    skipped = skipped_records(database)
    assert [(s.partition, s.offset, s.crashes) for s in skipped] == [(1, 6, 2)]
    batch = database.begin()
    counts = {key: batch.store("counts").get(key) for key in keys[:3]}
    batch.abort()
    expected = {key: 0 for key in keys[:3]}
    for i, value in enumerate(values):
        if value == b"plain":
            expected[keys[i % 3]] += 1
    assert counts == expected


def test_with_on_error_stop_the_catch_up_stops_instead_of_skipping(tmp_path: Path) -> None:
    """The old owner applied the record (it killed only the receiver): skipping it here would
    leave the key's state without it, which ``on_error: stop`` rules out."""
    kafka, _keys = killer_world()
    app = counting_app(tmp_path, on_error="stop")
    database = ProcessorDatabase.in_memory(DatabaseIdentity("crashy", 1), [StoreSpec("counts")])
    with pytest.raises(ProcessorStoppedError, match="with on_error: stop it is not skipped"):
        run_catch_ups(kafka, app, database)
    assert skipped_records(database) == []
