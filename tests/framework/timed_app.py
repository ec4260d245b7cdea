"""A test app that keeps time, a history of its input with ticks, and the live run over it.

The app has a tumbling window (sum), a session window (count), an event-time timer and a
processing-time timer (their function counts into a store), and a store whose values
expire (ttl). Its input ``readings`` grows 2 -> 4 partitions mid-history: records of a key
that moves sit in its parent up to the growth's marker, later ones in the child. The
history holds records out of order, records late for their windows, records late for the
growth (after their key moved: dead letters), and ticks (``tick_headers``) at known places in
parents before and after the markers and in the children. ``live_run`` processes it as the
live owners do: record by record in the order written, each tick applied to the keys due
that live in its partition there (``RecordProcessor.process``, not restore: outputs).
"""

from __future__ import annotations

import copy
import random
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from framework import App, AppConfig, Output, Record
from framework.coordination.registry import TopicEntry
from framework.processing import EncodedOutput, RecordProcessor, StoredMessage
from framework.time import Count, Session, Sum, Timer, Tumbling
from framework.time.ticks import tick_headers
from rebalance import Grow, Shrink, TopicHistory, bucket, key_hash
from statestore import DatabaseIdentity, ProcessorDatabase

TOPIC = "readings"
N = 2  # the input's initial partitions
B = 2  # the app's initial processors
START = 1_700_000_040_000  # event times start here (a whole minute)
COUNT_HEADER = "splitstate.count"
MARKER_HEADER = "splitstate.marker"

Header = tuple[str, bytes | None]
#: one record as written: ``(partition, offset, key, value, timestamp, headers)``
Written = tuple[int, int, bytes | None, bytes | None, int, list[Header]]


def timed_config(**changes: Any) -> AppConfig:
    """The app's config (no reachable broker unless ``changes`` say so)."""
    settings: dict[str, Any] = {
        "app_id": "timed",
        "kafka": {"bootstrap_servers": "127.0.0.1:9"},
        "inputs": [{"topic": TOPIC, "partitions": 4}],
        "outputs": [{"topic": "timed-out", "partitions": 1}],
        "initial_processors": B,
        "processors": 2,
        "spark": {"shards": 3},
        **changes,
    }
    return AppConfig.load(None, **settings)


def timed_app(config: AppConfig | None = None) -> App:
    """Windows, a session, timers and a store that expires, over ``readings``."""
    app = App(config or timed_config())
    app.windows_store("minute", Tumbling(60_000, grace=10_000), Sum())
    app.windows_store("visits", Session(30_000, grace=5_000), Count())
    app.store("last", ttl=90_000)
    app.store("alerts")

    @app.timer("idle", stores=["alerts"])
    def idle(timer: Timer, alerts: Any) -> Output:
        """An idle key (event or processing time): count it, say so."""
        alerts.set((alerts.get() or 0) + 1)
        return Output({"idle": timer.name, "due": timer.time, "kind": timer.kind})

    @app.processor(value_type=int, stores=["minute", "visits", "idle", "last"])
    def read(record: Record[int], state: dict[str, Any]) -> None:
        state["minute"].add(record.value)
        state["visits"].add(1)
        state["idle"].set_after(45_000, "quiet")
        if record.value % 3 == 0:  # some keys also wait for processing time
            state["idle"].set_wall_after(20_000, "nudge")
        state["last"].set(record.value)

    return app


@dataclass
class History:
    """The input as written (in that order), its registry history, and where ticks are."""

    initial: int = N
    topic: str = TOPIC
    written: list[Written] = field(default_factory=list)
    ends: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    ticks: list[tuple[int, int]] = field(default_factory=list)
    #: the input's partition history (``make_history`` sets it)
    history: TopicHistory = field(default_factory=lambda: TopicHistory.of(TOPIC, [N]))
    #: phases of 10 s written so far
    phases: int = 0
    #: the history steps the ticks written now name (``None``: none)
    steps: int | None = None

    @property
    def entries(self) -> dict[str, TopicEntry]:
        """The registry's entries of the app's inputs."""
        return {self.topic: TopicEntry(self.history)}

    def append(
        self,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        stamp: int,
        headers: list[Header],
    ) -> int:
        """Append a record to ``partition``; its offset."""
        offset = self.ends[partition]
        self.ends[partition] += 1
        self.written.append((partition, offset, key, value, stamp, headers))
        return offset

    def record(self, key: bytes, value: int, stamp: int, count: int) -> None:
        """A record of ``key`` placed (and headed) with ``count`` partitions."""
        partition = bucket(key_hash(key), self.initial, count)
        headers: list[Header] = [(COUNT_HEADER, str(count).encode())]
        self.append(partition, key, str(value).encode(), stamp, headers)

    def tick(self, partition: int, floor: int, wall: int) -> None:
        """A tick in ``partition``: event-time ``floor``, processing time ``wall`` (naming
        ``steps``)."""
        headers: list[Header] = list(tick_headers(floor, wall, steps=self.steps))
        offset = self.append(partition, None, b"", wall, headers)
        self.ticks.append((partition, offset))

    def marker(self, partition: int, marker_id: str) -> int:
        """A marker (``splitstate expand``'s) in ``partition``; its offset."""
        return self.append(partition, None, None, 0, [(MARKER_HEADER, marker_id.encode())])

    def rows(self, until: Mapping[int, int] | None = None) -> list[tuple[Any, ...]]:
        """The records (``tests.framework.test_spark_fold.Row``s) before ``until``."""
        return [
            (self.topic, p, o, k, v, t, [{"key": n, "value": x} for n, x in h] or None)
            for p, o, k, v, t, h in self.written
            if until is None or o < until.get(p, 0)
        ]


class _Phases:
    """Writes phases of 10 s of records (some out of order, some late) and ticks."""

    def __init__(self, log: History, seed: int, keys: int) -> None:
        self.log = log
        self.rng = random.Random(seed)
        self.keys = [f"sensor-{i:02d}".encode() for i in range(keys)]
        self.quiet = set(self.rng.sample(self.keys, keys // 4))  # only ticks move them later

    @property
    def step(self) -> int:
        return self.log.phases

    def phase(self, count: int, writers: list[bytes] | None = None, quiet: bool = False) -> None:
        rng, log = self.rng, self.log
        now = START + self.step * 10_000
        for key in rng.sample(writers or self.keys, len(writers or self.keys) // 2):
            if key in self.quiet and quiet:
                continue
            stamp = now + rng.randrange(10_000)
            roll = rng.random()
            if roll < 0.15:
                stamp -= rng.randrange(5_000, 25_000)  # out of order
            elif roll < 0.22:
                stamp -= rng.randrange(80_000, 200_000)  # late for its windows
            log.record(key, rng.randrange(1, 50), stamp, count)
        if self.step % 4 == 3:
            for partition in range(max(log.ends) + 1):  # in deleted partitions too
                if rng.random() < 0.8:
                    log.tick(partition, now - rng.randrange(0, 20_000), now + 5_000)
        log.phases += 1

    def late_for(self, count: int, moved: int, before: int) -> None:
        """Records placed with the count ``before`` a change, of keys it moved (``moved``:
        their home at ``count``): late, dead letters."""
        now = START + self.step * 10_000
        for key in self.rng.sample(self.keys, 4):
            h = key_hash(key)
            if bucket(h, self.log.initial, count) == moved != bucket(h, self.log.initial, before):
                self.log.record(key, self.rng.randrange(1, 50), now, before)

    def end(self, partitions: int) -> None:
        now = START + self.step * 10_000
        for partition in range(partitions):  # the end: time moves on for the quiet keys
            self.log.tick(partition, now - 20_000, now)


def make_history(seed: int = 35, keys: int = 24, steps: int = 30, topic: str = TOPIC) -> History:
    """Records of ``keys`` keys over ``steps`` phases of 10 s, ticks after every few phases
    (some only in some partitions), a growth 2 -> 4 halfway (its markers in the parents)."""
    log = History(topic=topic)
    phases = _Phases(log, seed, keys)
    for _ in range(steps // 2):
        phases.phase(N, quiet=phases.step > steps // 3)
    markers = {c: log.marker(c - N, f"{topic}/{2 * N}/{c}") for c in range(N, 2 * N)}
    for child in range(N, 2 * N):
        phases.late_for(2 * N, child, N)
    log.history = TopicHistory.of(topic, [N, 2 * N], markers)
    for _ in range(steps - steps // 2):
        phases.phase(2 * N, quiet=phases.step > steps // 3)
    phases.end(2 * N)
    return log


def extended(log: History, seed: int, steps: int = 12) -> tuple[History, list[Written]]:
    """A copy of ``log`` (with a growth to 4 partitions) written on for ``steps`` more
    phases, and what was written after ``log``."""
    longer = copy.deepcopy(log)
    phases = _Phases(longer, seed, len({w[2] for w in log.written if w[2] is not None}))
    for _ in range(steps):
        phases.phase(2 * N)
    phases.end(2 * N)
    return longer, longer.written[len(log.written) :]


def make_lives_history(seed: int = 34, keys: int = 40, *, stepped: bool = False) -> History:
    """4 -> 8 -> 5 -> 7 as ``expand`` and producers write it: growth markers in the parents,
    drain markers in the deleted partitions 5, 6, 7, the survivors' holds and the re-grown
    partitions' starts where their ends were; ticks in every partition Kafka has (deleted
    ones too), records and ticks in each phase. ``stepped``: each tick names the history
    steps its writer knew, a writer learning of each change three phases after its
    boundaries (as a view of the registry older than where its ticks land)."""
    log = History(initial=4, history=TopicHistory.of(TOPIC, [4]))
    phases = _Phases(log, seed, keys)
    log.steps = 0 if stepped else None
    for _ in range(6):
        phases.phase(4)
    grow8 = Grow(8, dict.fromkeys(range(4, 8), 0), {})
    markers = {c: log.marker(c - 4, f"{TOPIC}/1/8/{c}") for c in range(4, 8)}
    grow8 = Grow(8, grow8.starts, markers)
    for step in range(6):
        log.steps = 1 if stepped and step >= 3 else log.steps
        phases.phase(8)
    holds = {t: log.ends[t] for t in (1, 2, 3)}  # the survivors' ends, before the count
    drains = {d: log.marker(d, f"{TOPIC}/2/5/{d}/drain") for d in (5, 6, 7)}
    shrink5 = Shrink(5, holds, drains)
    phases.late_for(5, 1, 8)
    for step in range(6):
        log.steps = 2 if stepped and step >= 3 else log.steps
        phases.phase(5)
    starts = {c: log.ends[c] for c in (5, 6)}  # their ends, before the count
    grow7 = Grow(7, starts, {c: log.marker(c - 4, f"{TOPIC}/3/7/{c}") for c in (5, 6)})
    for step in range(6):
        log.steps = 3 if stepped and step >= 3 else log.steps
        phases.phase(7)
    phases.end(8)
    log.history = TopicHistory(TOPIC, (4, 8, 5, 7), (grow8, shrink5, grow7))
    return log


def new_processor(app: App, log: History) -> RecordProcessor:
    """A processor of ``app`` with the input's registry history."""
    return RecordProcessor(app, {log.topic: log.initial}, histories={log.topic: log.history})


def new_database(app: App) -> ProcessorDatabase:
    """An empty in-memory database of ``app`` (as one processor's state, every key)."""
    identity = DatabaseIdentity(app.config.app_id, -1, {"initial_processors": B})
    return ProcessorDatabase.in_memory(identity, app.store_specs())


def message(topic: str, written: Written) -> StoredMessage:
    """A record as ``RecordProcessor`` takes it."""
    partition, offset, key, value, stamp, headers = written
    return StoredMessage(topic, partition, offset, key, value, stamp, list(headers) or None)


def live_run(
    app: App,
    log: History,
    written: Iterable[Written],
    *,
    database: ProcessorDatabase | None = None,
    processor: RecordProcessor | None = None,
) -> tuple[ProcessorDatabase, list[EncodedOutput]]:
    """``written`` processed record by record in that order as a live owner does (each a
    batch, outputs kept, ticks applied to the keys due there); the state and the outputs."""
    database = database or new_database(app)
    processor = processor or new_processor(app, log)
    outputs: list[EncodedOutput] = []
    for item in written:
        batch = database.begin()
        made, _dead = processor.process(batch, message(log.topic, item))
        processor.take_letters()
        batch.set_offset(log.topic, item[0], item[1] + 1)
        batch.commit()
        outputs += made
    return database, outputs


def state_items(database: ProcessorDatabase, app: App) -> list[tuple[str, bytes, bytes]]:
    """Every ``(store, stored key, value bytes)`` of ``app``'s stores in ``database``."""
    return [
        (spec.name, key, raw)
        for spec in app.store_specs()
        for key, raw in database.backend.scan(spec.name)
    ]
