"""The promise: a key's results are the same however its state was built.

A random input of keyed records (timestamps out of order, some late) and ticks at random
positions goes through an app with every kind of time (windows of each kind, event and wall
timers, a failing timer, values that expire). Applied as the test driver does (one batch per
record), cut into other batches (RocksDB, batches sealed and committed later as the runtime
pipelines them), rebuilt in restore mode up to a point and then live (as after a crash), or
built for a subset of the keys only (as a catch-up gains them: records of other keys never
seen, ticks applied to the gained keys): every key ends with the same time record and state,
and the outputs and dead letters each run emitted are the same, per key.
"""

from __future__ import annotations

import itertools
import tempfile
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework import App, Output, Record
from framework.processing import RecordProcessor, StoredMessage
from framework.testing import TestDriver
from framework.time import Collect, Count, Session, Sliding, Sum, Timer, Tumbling
from framework.time.ticks import tick_headers
from rebalance import bucket, key_hash
from statestore import DatabaseIdentity, ProcessorDatabase
from tests.framework.time.apps import new_app

PARTITIONS = 2
KEYS = [b"a", b"b", b"c", b"d"]


def make_app() -> App:
    app = new_app(partitions=PARTITIONS)
    app.store("seen", ttl=20)
    app.windows_store("sums", Tumbling(10, grace=5), Sum())
    app.windows_store("sessions", Session(8, grace=3), Count(), emit="current")
    app.windows_store("slides", Sliding(6, grace=2), Collect())

    @app.timer("alarm", stores=["seen", "alarm"])
    def ring(timer: Timer, state: dict[str, Any]) -> Output:
        if timer.time % 7 == 0:
            raise ValueError("seven")
        state["seen"].set_field("rang", timer.time)
        if timer.name == "echo" and timer.time < 60:
            state["alarm"].set(timer.time + 9, "echo")
        return Output({"rang": timer.name, "at": timer.time, "now": timer.key_time})

    @app.processor("in", dict, ["seen", "sums", "sessions", "slides", "alarm"])
    def handle(record: Record[dict[str, Any]], state: dict[str, Any]) -> Output:
        v = record.value["v"]
        state["sums"].add(v)
        state["sessions"].add(v)
        state["slides"].add(v)
        state["seen"].set({"v": v, "before": state["seen"].get()})
        timers = state["alarm"]
        if v % 3 == 0:
            timers.set_after(v + 1, "echo")
        if v % 4 == 1:
            timers.set_wall_after(v, "wall")
        if v % 5 == 2:
            timers.cancel("echo")
        return Output({"v": v, "key_time": timers.key_time})

    return app


APP = make_app()
#: ("record", key, timestamp, v) or ("tick", floor, wall)
Step = tuple[Any, ...]
records = st.tuples(
    st.just("record"), st.sampled_from(KEYS), st.integers(0, 80), st.integers(0, 20)
)
ticks = st.tuples(st.just("tick"), st.integers(0, 100), st.integers(0, 120))
inputs = st.lists(st.one_of(records, records, records, ticks), min_size=1, max_size=30)


def messages(steps: list[Step]) -> list[StoredMessage]:
    """The steps as records of the input's partitions (a tick on each partition), in order."""
    offsets = [0] * PARTITIONS
    found = []
    for step in steps:
        if step[0] == "record":
            _kind, key, at, v = step
            partition = bucket(key_hash(key), PARTITIONS, PARTITIONS)
            value = f'{{"v": {v}}}'.encode()
            found.append(StoredMessage("in", partition, offsets[partition], key, value, at, []))
            offsets[partition] += 1
            continue
        _kind, floor, wall = step
        for partition in range(PARTITIONS):
            headers: list[tuple[str, bytes | None]] = list(tick_headers(floor, wall))
            found.append(
                StoredMessage("in", partition, offsets[partition], None, b"", floor, headers)
            )
            offsets[partition] += 1
    return found


def owner(key: bytes) -> bytes:
    """The input key an output belongs to (``current`` windows: ``<key>@<start>``)."""
    return key.split(b"@")[0]


class Seen:
    """What a run leaves: per key, its stored values and what it emitted (with where from)."""

    def __init__(self) -> None:
        #: per key: its outputs, then its dead letters (each in order)
        self.emitted: dict[bytes, list[tuple[Any, ...]]] = defaultdict(list)
        self.dead: dict[bytes, list[tuple[Any, ...]]] = defaultdict(list)
        self.state: dict[bytes, dict[str, Any]] = {}

    def take(self, outputs: list[Any], letters: list[Any]) -> None:
        for output in outputs:
            self.emitted[owner(output.key)].append(
                ("out", output.topic, output.key, output.value, output.origin)
            )
        for letter in letters:
            where = (letter.topic, letter.partition, letter.offset)
            self.dead[letter.key or b""].append(("dead", letter.stage, where))

    def read(self, database: ProcessorDatabase, keys: list[bytes]) -> None:
        names = [spec.name for spec in APP.store_specs()]
        self.state = {key: {name: database.get(name, key) for name in names} for key in keys}

    def of(self, keys: list[bytes], since: Callable[[tuple[Any, ...]], bool]) -> Any:
        return (
            {k: [e for e in self.emitted.get(k, []) if since(e)] for k in keys},
            {k: [e for e in self.dead.get(k, []) if since(e)] for k in keys},
            {k: self.state[k] for k in keys},
        )


def by_driver(steps: list[Step]) -> Seen:
    driver = TestDriver(APP, on_error="dead-letter")
    for step in steps:
        if step[0] == "record":
            driver.send("in", step[1], {"v": step[3]}, timestamp=step[2])
        else:
            driver.advance_time(step[1], wall=step[2])
    seen = Seen()
    seen.take(driver.outputs(), driver.dead_letters)
    seen.read(driver.database, KEYS)
    return seen


def by_batches(
    steps: list[Step],
    cuts: list[int],
    database: ProcessorDatabase,
    *,
    restore_below: int = 0,
    keys: list[bytes] | None = None,
    pipelined: bool = False,
    skip: int = 0,
) -> Seen:
    """Process the steps' messages in batches ending at ``cuts``; the first
    ``restore_below`` in restore mode; only ``keys``' records and ticks, when given; none of
    the first ``skip`` (another database applied them)."""
    processor = RecordProcessor(APP, {"in": PARTITIONS})
    wanted = None if keys is None else set(keys).__contains__
    seen, sealed = Seen(), None
    todo = messages(steps)
    bounds = sorted({0, *(c for c in cuts if 0 < c < len(todo)), len(todo)})
    for start, end in itertools.pairwise(bounds):
        batch = database.begin()
        for index in range(max(start, skip), end):
            message = todo[index]
            key = message.key()
            if wanted is not None and key is not None and not wanted(key):
                continue  # another processor's key: never read here
            restore = index < restore_below
            outputs, dead = processor.process(batch, message, restore=restore, keys=wanted)
            letters = processor.take_letters()
            seen.take(outputs, [] if dead is None else [dead])
            seen.take([], letters)
        if pipelined:  # sealed, readable by the next batch, committed after it began
            batch.seal()
            if sealed is not None:
                sealed.commit()
            sealed = batch
        else:
            batch.commit()
    if sealed is not None:
        sealed.commit()
    seen.read(database, keys or KEYS)
    return seen


def _database(directory: str | None) -> ProcessorDatabase:
    identity = DatabaseIdentity(APP.app_id, 0)
    if directory is None:
        return ProcessorDatabase.in_memory(identity, APP.store_specs())
    return ProcessorDatabase.open(Path(directory) / "processor-0", identity, APP.store_specs())


def everything(_entry: tuple[Any, ...]) -> bool:
    return True


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=inputs,
    cuts=st.lists(st.integers(0, 70), max_size=6),
    restore_at=st.integers(0, 30),
    subset=st.lists(st.sampled_from(KEYS), min_size=1, unique=True),
)
def test_a_keys_results_do_not_depend_on_how_its_state_was_built(
    steps: list[Step], cuts: list[int], restore_at: int, subset: list[bytes]
) -> None:
    expected = by_driver(steps)
    whole = expected.of(KEYS, everything)
    with _database(None) as database:
        assert by_batches(steps, [], database).of(KEYS, everything) == whole
    with tempfile.TemporaryDirectory(prefix="time-replay-") as directory:
        with _database(directory) as database:
            got = by_batches(steps, cuts, database, pipelined=True)
        assert got.of(KEYS, everything) == whole, "in other batches, pipelined, on RocksDB"

    restore_at = min(restore_at, len(steps))
    below = len(messages(steps[:restore_at]))
    with _database(None) as database:
        got = by_batches(steps, [below, *cuts], database, restore_below=below)
    assert got.of(KEYS, everything) == expected.of(KEYS, after(steps, restore_at)), "restored"

    with _database(None) as database:
        got = by_batches(steps, cuts, database, keys=subset)
    assert got.of(subset, everything) == expected.of(subset, everything), "a subset of keys"

    with _database(None) as first, _database(None) as second:
        by_batches(steps[:restore_at], cuts, first)
        transfer(first, second, subset)
        got = by_batches(steps, cuts, second, keys=subset, skip=len(messages(steps[:restore_at])))
    assert got.of(subset, after(steps, restore_at)) == expected.of(subset, after(steps, restore_at))


def transfer(source: ProcessorDatabase, target: ProcessorDatabase, keys: list[bytes]) -> None:
    """Copy the state of ``keys`` (every store, time included), as a scale's transfer does."""
    batch = target.begin()
    for name in target.store_names():
        for key, value in source.items(name):
            if key in keys:
                batch.store(name).set(key, value)
    batch.commit()


def after(steps: list[Step], step: int) -> Callable[[tuple[Any, ...]], bool]:
    """Whether an output or dead letter came from a message of ``steps[step:]``."""
    done = len(messages(steps[:step]))
    later = {(m.topic(), m.partition(), m.offset()) for m in messages(steps)[done:]}
    return lambda entry: (entry[4] if entry[0] == "out" else entry[2]) in later
