"""A small world for the catch-up tests of time: a windowed-average app, records and ticks
appended to an in-memory Kafka, and the owner that processes a partition live (the oracle a
receiver's state and outputs are compared with)."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from framework import App, AppConfig, KafkaConfig, Record
from framework.config import TopicConfig
from framework.kafka import TopicSpec
from framework.processing import RecordProcessor, StoredMessage
from framework.records import DeadLetter, EncodedOutput
from framework.runtime.catchup import CatchUp
from framework.runtime.crashes import CrashGuard
from framework.runtime.tick_guard import guarded_tick
from framework.snapshots.source_starts import source_scope
from framework.time import Mean, Tumbling, WindowResult
from framework.time.ticks import is_tick_message, tick_headers
from rebalance import HandoffEvent, TopicHistory, bucket, key_hash
from rebalance.control import ControlState, handoff_record
from statestore import DatabaseIdentity, ProcessorDatabase
from tests.clocks import ManualClock
from tests.sim.broker import Broker
from tests.sim.kafka import MemoryKafka

TOPIC = "in"
OUT = "averages"
#: tumbling windows of 10 s, closed 1 s after their end
SIZE, GRACE = 10_000, 1_000
#: the stores a time app's database holds: the window store's time lives in the two below
TIME_STORES = ("splitstate.due", "splitstate.time")


class Died(BaseException):
    """The process died while a function ran (no ``except Exception`` catches it): it
    crashed, ran out of memory, was killed."""


def window_app(
    tmp_path: Path,
    partitions: int,
    initial: int,
    app_id: str = "timed",
    killer: bytes | None = None,
) -> App:
    """Per key, the mean of each 10 s tumbling window of int values (by Kafka timestamp);
    the result of every window of ``killer`` kills the process (``Died``)."""
    return windowed(
        AppConfig(
            app_id=app_id,
            kafka=KafkaConfig(bootstrap_servers="simulated:9092"),
            inputs=[TopicConfig(topic=TOPIC, partitions=partitions)],
            outputs=[TopicConfig(topic=OUT)],
            initial_processors=initial,
            state_dir=tmp_path,
        ),
        killer,
    )


def windowed(config: AppConfig, killer: bytes | None = None) -> App:
    """The app of ``window_app`` with ``config``."""
    app = App(config)

    def result(window: WindowResult) -> dict[str, Any]:
        if window.key == killer:
            raise Died(f"the result of {window.key!r}'s window [{window.start}, {window.end})")
        return {"start": window.start, "end": window.end, "value": window.value}

    @app.window(
        TOPIC,
        Tumbling(SIZE, grace=GRACE),
        Mean(),
        value_type=int,
        result=None if killer is None else result,
    )
    def average(record: Record[int]) -> int:
        return record.value

    return app


def keys_in(partition: int, initial: int, count: int, how_many: int) -> list[bytes]:
    """``how_many`` keys that live in ``partition`` of a topic of ``initial`` partitions grown
    to ``count``."""
    found = (f"key-{i}".encode() for i in range(10_000))
    return [k for k in found if bucket(key_hash(k), initial, count) == partition][:how_many]


def memory_kafka(partitions: int) -> MemoryKafka:
    """An in-memory Kafka holding the input topic."""
    kafka = MemoryKafka(Broker(random.Random(0)), ManualClock())
    kafka.create_topics([TopicSpec(TOPIC, partitions)])
    return kafka


def append_record(kafka: MemoryKafka, partition: int, key: bytes, value: int, at: int) -> int:
    """Append a keyed record with value ``value`` and timestamp ``at``; returns its offset."""
    record = {"key": key, "value": str(value).encode(), "headers": (), "timestamp_ms": at}
    return kafka.broker.append((TOPIC, partition), {**record, "origin": "test"}).offset


def append_tick(kafka: MemoryKafka, partition: int, floor: int, wall: int | None = None) -> int:
    """Append a tick (floor ``floor``, processing time ``wall``, default ``floor``); returns
    its offset."""
    headers = tuple(tick_headers(floor, floor if wall is None else wall))
    record = {"key": None, "value": b"", "headers": headers, "timestamp_ms": floor}
    return kafka.broker.append((TOPIC, partition), {**record, "origin": "test"}).offset


def stored(kafka: MemoryKafka, partition: int) -> list[StoredMessage]:
    """The partition's records as the runtime reads them."""
    return [
        StoredMessage(
            TOPIC, partition, r.offset, r.key, r.value, r.timestamp_ms, list(r.headers or ())
        )
        for r in kafka.broker.partition((TOPIC, partition)).records
    ]


@dataclass
class Owner:
    """A processor that processes records live (outputs kept by the offset they came from)."""

    app: App
    processor: int
    histories: dict[str, TopicHistory] | None = None
    #: its state (default: in memory)
    database: ProcessorDatabase = None  # type: ignore[assignment]
    records: RecordProcessor = field(init=False)
    #: (partition, offset) -> the outputs processing it emitted
    emitted: dict[tuple[int, int], list[EncodedOutput]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        initial = self.app.config.initial_processors
        self.database = ProcessorDatabase.in_memory(
            DatabaseIdentity(
                self.app.config.app_id, self.processor, {"initial_processors": initial}
            ),
            self.app.store_specs(),
        )
        self._restart()

    def _restart(self) -> None:
        """A new process over the same state: what it holds in memory is gone."""
        self.records = RecordProcessor(
            self.app, {TOPIC: self.app.config.inputs[0].partitions}, histories=self.histories
        )

    def process_careful(self, messages: Iterable[StoredMessage]) -> tuple[int, list[DeadLetter]]:
        """Process ``messages`` as the runtime does while crash suspects remain: one per
        batch under the crash guard, a tick watched item by item (``guarded_tick``); a death
        (``Died``) starts the processor again (a new ``RecordProcessor``) at the same record.
        Returns the deaths and the dead letters."""
        deaths, letters = 0, list[DeadLetter]()
        limit = self.app.config.crash_limit
        for message in messages:
            where = (TOPIC, message.partition(), message.offset())
            tick = is_tick_message(TOPIC, message)
            while True:
                guard = CrashGuard(self.database, limit, self.processor, clock=ManualClock())
                guard.attempt({where[:2]: [where[2], where[2]]}, {where} if tick else ())
                batch = self.database.begin()
                try:
                    if guard.crashes(*where) >= limit:
                        dead = guard.skip(batch, message, where, "dead", restore=False)
                        outputs: list[EncodedOutput] = []
                    else:
                        apply = partial(guarded_tick, guard, self.records) if tick else None
                        outputs, dead = (apply or self.records.process)(
                            batch, message, restore=False, where=where, keys=None
                        )
                except Died:
                    deaths += 1
                    self._restart()  # (its state as committed)
                    continue
                guard.survived()
                batch.set_offset(*where[:2], where[2] + 1)
                batch.commit()
                letters += [*([] if dead is None else [dead]), *self.records.take_letters()]
                if outputs:
                    self.emitted[where[1:]] = outputs
                break
        return deaths, letters

    def process(self, messages: Iterable[StoredMessage]) -> None:
        """Process ``messages`` in order, one batch each, keeping what they emitted."""
        for message in messages:
            batch = self.database.begin()
            outputs, dead = self.records.process(batch, message)
            batch.set_offset(TOPIC, message.partition(), message.offset() + 1)
            batch.commit()
            assert dead is None or dead.stage == "late", dead
            assert not self.records.take_letters()
            if outputs:
                self.emitted[(message.partition(), message.offset())] = outputs


def results(outputs: Iterable[EncodedOutput]) -> list[tuple[bytes | None, bytes | None]]:
    """``(key, value)`` of each output, in order."""
    return [(o.key, o.value) for o in outputs]


def state_of(
    database: ProcessorDatabase, keys: Sequence[bytes], stores: Sequence[str] = TIME_STORES
) -> dict[str, dict[bytes, Any]]:
    """Per store, the committed values of ``keys`` (absent ones left out)."""
    missing = object()
    return {
        store: {k: v for k in keys if (v := database.get(store, k, missing)) is not missing}
        for store in stores
    }


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


def scaled(
    state: ControlState, generation: int, processors: int, history: dict[str, Any]
) -> ControlState:
    """``state`` with a scale to ``processors`` over the topic's ``history``."""
    record = {
        "type": "scale",
        "generation": generation,
        "processors": processors,
        "partitions": {TOPIC: history["counts"][-1]},
        "histories": {TOPIC: history},
    }
    return state.apply(record)


def released(state: ControlState, source: int, target: int, at: dict[int, int]) -> ControlState:
    """``state`` with the handoff ``source`` -> ``target`` released at ``at`` (partition ->
    F)."""
    scaling = state.scaling
    assert scaling is not None, state.ignored
    g = scaling.generation
    for event in (HandoffEvent.START_CATCH_UP, HandoffEvent.CAUGHT_UP):
        state = state.apply(handoff_record(g, source, target, event))
    offsets = {(TOPIC, p): f for p, f in at.items()}
    return state.apply(handoff_record(g, source, target, HandoffEvent.RELEASE, offsets))


def catch_up(
    kafka: MemoryKafka,
    app: App,
    state: ControlState,
    processor: int,
    database: ProcessorDatabase,
    **options: Any,
) -> CatchUp:
    """Processor ``processor``'s catch-up of ``state``'s scale, run until every handoff it
    receives is released and read to F (``read_to_f``)."""
    catchup = begin_catch_up(kafka, app, state, processor, database, **options)
    return read_to_f(kafka, app, state, catchup)


def begin_catch_up(
    kafka: MemoryKafka,
    app: App,
    state: ControlState,
    processor: int,
    database: ProcessorDatabase,
    **options: Any,
) -> CatchUp:
    """Processor ``processor``'s catch-up of ``state``'s scale, nothing read yet; the group
    committed every partition it reads to its end (T1) unless a test set it already."""
    scaling = state.scaling
    assert scaling is not None
    initial = app.config.initial_processors
    histories = {TOPIC: scaling.histories[TOPIC]} if TOPIC in scaling.histories else None
    records = RecordProcessor(app, {TOPIC: app.config.inputs[0].partitions}, histories=histories)
    group = kafka.broker.groups.setdefault(app.config.app_id, {})
    catchup = CatchUp(
        processor, initial, scaling, kafka=kafka, group_id=app.config.app_id, database=database,
        records=records, **options,
    )  # fmt: skip
    for position in catchup.bounds:
        group.setdefault(position, kafka.broker.partition(position).end)
    catchup.refresh(force=True)
    return catchup


def read_to_f(kafka: MemoryKafka, app: App, state: ControlState, catchup: CatchUp) -> CatchUp:
    """Release ``catchup``'s handoffs (the group committed F: T1 = F) and step it until
    every one is read to F."""
    assert state.scaling is not None
    incoming = state.scaling.incoming(catchup.processor)
    for handoff in incoming:
        kafka.broker.groups[app.config.app_id].update(handoff.released)
        catchup.release(handoff)
    catchup.refresh(force=True)
    for _ in range(10_000):
        if all(catchup.finished(h) for h in incoming):
            return catchup
        catchup.step(7)
        if isinstance(kafka.clock, ManualClock):  # (a bulk build polls by it)
            kafka.clock.now += 0.1
    raise AssertionError(f"the catch-up did not finish: {catchup.positions}")


@dataclass
class CopiedBuild:
    """A bulk build (``BulkBuild``) as the sources' snapshots give one: per source, its
    gained keys' values in ``parts`` (source -> the database of its snapshot, the keys, and
    per partition the offset its snapshot covers), written into ``database`` with the
    catch-up's progress (``scope``: per partition the lowest offset covered), each
    source's (``source_scope``) and the loaded flag."""

    database: ProcessorDatabase
    scope: str
    parts: dict[int, tuple[ProcessorDatabase, list[bytes], dict[int, int]]]
    polled_every: bool = False

    def describe(self) -> str:
        """What it is."""
        return "copied from the sources' states"

    def cancel(self) -> None:
        """Nothing runs."""

    def poll(self) -> int:
        """Write it all in one batch; returns how many keys."""
        batch = self.database.begin()
        lowest: dict[int, int] = {}
        for source, (snapshot, keys, covers) in self.parts.items():
            for store in snapshot.store_names():
                for key in keys:
                    value = snapshot.get(store, key)
                    if value is not None:
                        batch.store(store).set(key, value)
            for partition, offset in covers.items():
                batch.set_progress(source_scope(self.scope, source), TOPIC, partition, offset)
                lowest[partition] = min(offset, lowest.get(partition, offset))
        for partition, offset in lowest.items():
            batch.set_progress(self.scope, TOPIC, partition, offset)
        batch.set_flag(f"{self.scope}-bootstrapped")
        batch.commit()
        return sum(len(keys) for _, keys, _ in self.parts.values())
