"""A canonical two-input app (``appending_app``) scaled 1 -> 2 on the in-memory Kafka: its old
owner, a ``TestDriver`` (the live reference: each key's state is the order it applied the
key's records in), and processor 1's catch-up of the keys it gains (partition 1 of each
input). Every record the driver processes, forced ticks included, is appended to the Kafka
log at the same offset, so the receiver reads the log the old owner read."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from framework.kafka import TopicSpec
from framework.processing import RecordProcessor
from framework.runtime.catchup import BootstrapStarter, CatchUp
from framework.testing import TestDriver
from rebalance import HandoffEvent, TopicHistory
from rebalance.control import ControlState, Handoff, Scale, handoff_record
from rebalance.positions import Position
from statestore import DatabaseIdentity, ProcessorDatabase
from tests.clocks import ManualClock
from tests.framework.order.appending_app import INPUTS, PARTITIONS, appending_app
from tests.framework.order.appending_world import KEYS, Sent, home
from tests.sim.broker import Broker
from tests.sim.kafka import MemoryKafka

APP_ID = "appending"
#: the partitions processor 1 gains (S1): partition 1 of each input
GAINED: tuple[Position, ...] = tuple((topic, 1) for topic in INPUTS)
#: the keys it gains
GAINED_KEYS = [key for key in KEYS if home(INPUTS[0], key)[1] == 1]
_FLAT = {"counts": [PARTITIONS], "thresholds": {}}


def world() -> tuple[MemoryKafka, TestDriver]:
    """The Kafka holding the inputs, and the old owner (processor 0 of one), mirrored into it."""
    kafka = MemoryKafka(Broker(random.Random(0)), ManualClock())
    kafka.create_topics([TopicSpec(topic, PARTITIONS) for topic in INPUTS])
    driver = TestDriver(appending_app())
    process = driver._process

    def mirrored(
        topic: str, partition: int, key: bytes | None, raw: bytes | None, **kw: Any
    ) -> None:
        record = {
            "key": key,
            "value": raw or b"",
            "headers": tuple(kw["headers"]),
            "timestamp_ms": kw["timestamp"],
            "origin": "test",
        }
        kafka.broker.append((topic, partition), record)
        process(topic, partition, key, raw, **kw)

    driver._process = mirrored  # type: ignore[method-assign]
    return kafka, driver


def sent_to(driver: TestDriver, sent: list[Sent]) -> None:
    """Send ``sent`` to the old owner."""
    for topic, key, at in sent:
        driver.send(topic, key, {"at": at}, timestamp=at)


def scale_state() -> ControlState:
    """The control state of the scale 1 -> 2 (generation 1), processor 1 catching up."""
    state = ControlState()
    for record in (
        {
            "type": "app",
            "app_id": APP_ID,
            "initial_processors": 1,
            "inputs": dict.fromkeys(INPUTS, PARTITIONS),
            "key_hash": "murmur3",
        },
        {"type": "generation", "generation": 0, "processors": 1},
        {
            "type": "scale",
            "generation": 1,
            "processors": 2,
            "partitions": dict.fromkeys(INPUTS, PARTITIONS),
            "histories": dict.fromkeys(INPUTS, _FLAT),
        },
    ):
        state = state.apply(record)
    for event in (HandoffEvent.START_CATCH_UP, HandoffEvent.CAUGHT_UP):
        state = state.apply(handoff_record(1, 0, 1, event))
    return state


def released(state: ControlState, finals: dict[Position, int]) -> Handoff:
    """The handoff 0 -> 1 of ``state`` released at ``finals`` (F)."""
    state = state.apply(handoff_record(1, 0, 1, HandoffEvent.RELEASE, finals))
    scaling = state.scaling
    assert scaling is not None
    return scaling.handoffs[(0, 1)]


def receiver_database(path: Path) -> ProcessorDatabase:
    """Processor 1's database at ``path``."""
    app = appending_app()
    return ProcessorDatabase.open(path, DatabaseIdentity(APP_ID, 1), app.store_specs())


def catch_up(
    kafka: MemoryKafka,
    database: ProcessorDatabase,
    t1: dict[Position, int],
    bootstrap: BootstrapStarter | None = None,
) -> CatchUp:
    """Processor 1's catch-up of the scale, the group's committed offsets ``t1`` (T1)."""
    scaling = scale_state().scaling
    assert isinstance(scaling, Scale)
    app = appending_app()
    histories = {topic: TopicHistory.of(topic, [PARTITIONS]) for topic in INPUTS}
    records = RecordProcessor(app, dict.fromkeys(INPUTS, PARTITIONS), histories=histories)
    kafka.broker.groups[APP_ID] = dict(t1)
    catchup = CatchUp(
        1, 1, scaling, kafka=kafka, group_id=APP_ID, database=database, records=records,
        bootstrap=bootstrap,
    )  # fmt: skip
    catchup.refresh(force=True)
    return catchup


def t1_of(driver: TestDriver) -> dict[Position, int]:
    """What the old owner committed of the partitions processor 1 reads (T1)."""
    offsets = driver.offsets()
    return {position: offsets.get(position, 0) for position in GAINED}


def step_until_read(kafka: MemoryKafka, catchup: CatchUp, ends: dict[Position, int]) -> None:
    """Step ``catchup`` until it read every partition up to ``ends``."""
    clock = kafka.clock
    assert isinstance(clock, ManualClock)
    for _ in range(10_000):
        if all(catchup.positions[p] >= end for p, end in ends.items()):
            catchup.step(5)
            return
        catchup.step(5)
        clock.now += 0.1
    raise AssertionError(f"the catch-up did not read to {ends}: {catchup.positions}")


def finish(kafka: MemoryKafka, catchup: CatchUp, finals: dict[Position, int]) -> None:
    """Release the handoff at ``finals`` (the group committed them: T1 = F), read to F and
    complete it."""
    kafka.broker.groups[APP_ID].update(finals)
    handoff = released(scale_state(), finals)
    catchup.release(handoff)
    catchup.refresh(force=True)
    clock = kafka.clock
    assert isinstance(clock, ManualClock)
    for _ in range(10_000):
        if catchup.finished(handoff):
            catchup.complete(handoff)
            return
        catchup.step(5)
        clock.now += 0.1
    raise AssertionError(f"the catch-up did not finish: {catchup.positions}")


def gained_state(database: ProcessorDatabase) -> dict[bytes, str]:
    """The gained keys' state in the receiver's ``database``."""
    found = {key: database.get("applied", key) for key in GAINED_KEYS}
    return {key: value for key, value in found.items() if value}


def owner_state(driver: TestDriver) -> dict[bytes, str]:
    """The gained keys' state on the old owner."""
    found = {key: driver.state("applied", key) for key in GAINED_KEYS}
    return {key: value for key, value in found.items() if value}
