"""A processor across a shrink and a re-growth of its input (issue 34), on the in-memory Kafka
with a topic registry written by hand (no `splitstate expand`).

The input starts with 2 partitions and grew to 4 before any record of 2 or 3 (2 split from
0, 3 from 1). A shrink back to 2 deletes 2 and 3: their keys merge into 0 and 1 from each
survivor's hold offset on. A record of a merged key in 0 waits until 2 was read past its
drain (offset ``drains[2]``); 0's own keys before it are processed. A later growth to 3
re-uses partition 2 (its offsets go on): its new life waits for 0 again.

Values are ``<key>:<seq>``: the fold app (``tests/sim/app.py``) counts, per key, records that
came out of order (``bad``), and emits ``[producer, seq, ...]`` for each record.
"""

from __future__ import annotations

import random
import shutil
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from framework.coordination.registry import Growth, TopicRegistry
from framework.growth.placement import COUNT_HEADER
from framework.kafka import TopicSpec
from framework.runtime.loop import ProcessorRuntime
from framework.runtime.stats import RuntimeStats
from rebalance import Grow, Shrink, TopicHistory, bucket, key_hash
from statestore import ProcessorDatabase, processor_path
from tests.clocks import ManualClock
from tests.sim.app import INPUT, OUTPUT, make_app
from tests.sim.broker import Broker
from tests.sim.kafka import MemoryKafka

N = 2
GROWN = Grow(4, {2: 0, 3: 0}, {2: 0, 3: 0})  # markers right after each parent's first record


def keys_of(count: int, partition: int, n: int) -> list[bytes]:
    """``n`` keys ``count`` partitions place in ``partition``."""
    keys = (f"k{i}".encode() for i in range(10_000))
    return [k for k in keys if bucket(key_hash(k), N, count) == partition][:n]


(A,) = keys_of(4, 0, 1)  # 0's own key: never moves
(B,) = keys_of(4, 1, 1)
K, R = keys_of(4, 2, 2)  # live in 2 with 4 (and 3) partitions, merge into 0 with 2
(C,) = keys_of(4, 3, 1)


class World:
    """The in-memory Kafka, the app, and what was written to the input."""

    def __init__(self, tmp_path: Path, *, exactly_once: bool = False, in_flight: int = 1) -> None:
        self.kafka = MemoryKafka(Broker(random.Random(7)), ManualClock())
        self.kafka.create_topics([TopicSpec(INPUT, 4), TopicSpec(OUTPUT, 2)])
        self.registry = TopicRegistry(self.kafka)
        self.registry.ensure_topic()
        self.registry.register(INPUT, N)
        self.registry.register(OUTPUT, 2)
        self.app = make_app(
            tmp_path,
            partitions=N,
            initial_processors=1,
            max_records=3,
            lease_ms=2000,
            ready_lag=0,
            exactly_once=exactly_once,
            in_flight=in_flight,
        )
        self.kafka.create_topics([TopicSpec(self.app.config.dead_letters, 1)])
        self.seqs: dict[bytes, int] = {}
        self.record(TopicHistory(INPUT, (N, 4), (GROWN,)))

    def record(self, history: TopicHistory) -> None:
        """Write ``history`` to the registry: a last step whose markers or drains are not
        recorded yet is the change in progress, as ``expand`` records it."""
        entry = self.registry.read()[INPUT]
        step = history.last_step
        change = None
        if isinstance(step, Shrink) and not step.drains:
            change = Growth(step.count, 0, kind="shrink")
        elif isinstance(step, Grow) and not step.markers:
            change = Growth(step.count, 0)
        self.registry.write(replace(entry, history=history, growth=change))
        assert self.registry.read()[INPUT].history == history

    def put(self, partition: int, key: bytes, count: int) -> int:
        """Append the key's next record, placed with ``count`` partitions; its offset."""
        seq = self.seqs[key] = self.seqs.get(key, 0) + 1
        value = f"{key.decode()}:{seq}".encode()
        headers = ((COUNT_HEADER, str(count).encode()),)
        record = {"key": key, "value": value, "headers": headers, "timestamp_ms": 0, "origin": "p"}
        return self.kafka.broker.append((INPUT, partition), record).offset

    def end(self, partition: int) -> int:
        return self.kafka.broker.end_offset(INPUT, partition)

    def outputs(self) -> dict[str, list[int]]:
        """Each key's seqs, in the order their outputs were emitted."""
        found: dict[str, list[int]] = {}
        for partition in range(2):
            for record in self.kafka.broker.records(OUTPUT, partition):
                if record.value is not None and record.marker is None:
                    producer, seq, *_rest = orjson.loads(record.value)
                    found.setdefault(producer, []).append(seq)
        return found

    def dead_letters(self) -> dict[tuple[int, int], bytes]:
        """``(partition, offset)`` of each dead letter, with its reason."""
        found = {}
        for record in self.kafka.broker.records(self.app.config.dead_letters, 0):
            headers = dict(record.headers)
            where = (
                int(headers["splitstate.partition"] or b""),
                int(headers["splitstate.offset"] or b""),
            )
            found[where] = headers["splitstate.error"] or b""
        return found

    def committed(self, partition: int) -> int | None:
        return self.kafka.broker.groups.get(self.app.config.app_id, {}).get((INPUT, partition))

    def run(self, until: int | None = None, *, steps: int = 200) -> RuntimeStats:
        """Run processor 0 for ``steps`` loop steps (or until it processed ``until``)."""
        taken = [0]

        def done(stats: RuntimeStats) -> bool:
            taken[0] += 1
            return taken[0] > steps or (until is not None and stats.records >= until)

        return ProcessorRuntime(self.app, 0, kafka=self.kafka).run(until=done)

    def state(self, key: bytes) -> dict[str, object] | None:
        path = processor_path(self.app.config.app_state_dir, 0)
        with ProcessorDatabase.open_read_only(path) as database:
            value = database.get("folds", key)
        return None if value is None else dict(value)


def shrunk(world: World, *, drains: dict[int, int] | None = None) -> TopicHistory:
    """4 -> 2 with the survivors' holds at their ends now (and ``drains`` if given)."""
    return TopicHistory(
        INPUT, (N, 4, N), (GROWN, Shrink(N, {0: world.end(0), 1: world.end(1)}, drains or {}))
    )


def before_the_shrink(world: World) -> None:
    """Records placed with 2 partitions, then with 4: K's in 2, C's in 3."""
    world.put(0, A, 2)  # 0@0 (0's marker for 2 is at 0: the growth fence)
    world.put(1, B, 2)  # 1@0
    for _ in range(3):
        world.put(2, K, 4)  # 2@0..2
    world.put(0, A, 4)  # 0@1
    world.put(3, C, 4)  # 3@0


@pytest.mark.parametrize(("exactly_once", "in_flight"), [(False, 1), (True, 3), (False, 3)])
def test_a_merged_key_waits_for_its_deleted_partition_and_the_keys_before_it_pass(
    tmp_path: Path, exactly_once: bool, in_flight: int
) -> None:
    world = World(tmp_path, exactly_once=exactly_once, in_flight=in_flight)
    before_the_shrink(world)
    history = shrunk(world)  # holds: 0 at 2, 1 at 1; drains not recorded yet
    world.record(history)
    world.put(0, A, 2)  # 0@2: 0's own key, after the hold: processed
    held = world.put(0, K, 2)  # 0@3: K merged into 0: waits for 2's drain
    world.put(0, A, 2)  # 0@4: after the held record: waits too
    world.run(steps=300)
    outputs = world.outputs()
    assert outputs[A.decode()] == [1, 2, 3] and outputs[K.decode()] == [1, 2, 3]
    assert world.committed(0) == held  # never past the held record
    world.record(history.with_drains({2: 2, 3: 0}))
    world.run(steps=300)
    outputs = world.outputs()
    assert outputs[A.decode()] == [1, 2, 3, 4] and outputs[K.decode()] == [1, 2, 3, 4]
    assert world.committed(0) == world.end(0)
    assert world.dead_letters() == {}
    state = world.state(K)
    assert state is not None and state["n"] == 4 and state["bad"] == 0


def test_a_processor_whose_view_lacks_the_shrink_reads_the_registry_again_and_holds(
    tmp_path: Path,
) -> None:
    # the processor read the registry before the shrink was recorded; a shrink changes
    # nothing Kafka describes, so it learns of it from a record its view says is not home:
    # judged by the old view, K's record in 0 would be late (a dead letter: data lost)
    world = World(tmp_path)
    before_the_shrink(world)
    written: list[TopicHistory] = []

    def shrink_meanwhile(stats: RuntimeStats) -> bool:
        if not written and stats.records >= 6:
            written.append(shrunk(world))
            world.record(written[0])
            world.put(0, A, 2)
            world.put(0, K, 2)
            world.put(0, A, 2)
        return len(written) > 0 and world.kafka.clock.monotonic() > 30

    ProcessorRuntime(world.app, 0, kafka=world.kafka).run(until=shrink_meanwhile)
    assert world.dead_letters() == {}
    assert world.committed(0) == 3  # held at K's record
    assert world.outputs()[K.decode()] == [1, 2, 3]
    history = written[0]
    world.record(history.with_drains({2: 2, 3: 0}))
    world.run(steps=300)
    outputs = world.outputs()
    assert outputs[A.decode()] == [1, 2, 3, 4] and outputs[K.decode()] == [1, 2, 3, 4]
    assert world.dead_letters() == {}


class CrashError(Exception):
    """The processor dies (no final commit)."""


def test_a_processor_that_dies_while_held_resumes_at_the_held_record(tmp_path: Path) -> None:
    world = World(tmp_path, exactly_once=True)
    before_the_shrink(world)
    history = shrunk(world)
    world.record(history)
    world.put(0, A, 2)
    held = world.put(0, K, 2)
    world.put(0, A, 2)

    def die_while_held(stats: RuntimeStats) -> bool:
        if world.kafka.clock.monotonic() > 20:
            raise CrashError
        return False

    with pytest.raises(CrashError):
        ProcessorRuntime(world.app, 0, kafka=world.kafka).run(until=die_while_held)
    assert world.committed(0) == held
    world.run(steps=100)  # restarted: held again at the same record
    assert world.committed(0) == held
    world.record(history.with_drains({2: 2, 3: 0}))
    world.run(steps=300)
    outputs = world.outputs()
    assert outputs[A.decode()] == [1, 2, 3, 4] and outputs[K.decode()] == [1, 2, 3, 4]
    state = world.state(K)
    assert state is not None and state["n"] == 4 and state["bad"] == 0


def test_a_regrown_partition_is_gated_again_and_records_between_its_lives_are_late(
    tmp_path: Path,
) -> None:
    world = World(tmp_path)
    world.put(0, A, 2)  # 0@0
    world.put(1, B, 2)  # 1@0
    world.put(2, R, 4)  # 2@0
    drain = world.put(2, R, 4)  # 2@1: 2's last record before the shrink's drain
    history = shrunk(world, drains={2: drain, 3: 0})
    world.put(3, C, 4)  # 3@0 (3's drain at 0)
    late = world.put(2, R, 4)  # 2@2: placed with 4 partitions by a paused producer
    world.seqs[R] -= 1  # (its seq is never applied: sent again below)
    world.put(0, R, 2)  # 0@1: R merged into 0 (after 0's hold at 1)
    marker = world.put(0, A, 2)  # 0@2: stands for the re-growth's marker of 2 in 0
    start = world.end(2)  # 2's new life starts at 3
    regrown = TopicHistory(
        INPUT,
        (N, 4, N, 3),
        (*history.steps, Grow(3, {2: start})),  # marker not recorded yet
    )
    world.record(regrown)
    world.put(2, R, 3)  # 2@3: R back in 2, its new life: waits for 0's marker
    world.run(steps=300)
    assert world.outputs()[R.decode()] == [1, 2, 3]
    assert world.committed(2) == start  # held at the new life's first record
    letters = world.dead_letters()
    assert list(letters) == [(2, late)]
    assert (
        letters[(2, late)].startswith(b"late: ")
        and b"drain marker (offset 1)" in letters[(2, late)]
    )
    world.record(regrown.with_markers({2: marker}))
    world.run(steps=300)
    assert world.outputs()[R.decode()] == [1, 2, 3, 4]
    assert world.committed(2) == world.end(2)


def test_a_lost_state_directory_is_rebuilt_through_the_holds(tmp_path: Path) -> None:
    # the group processed everything; the state directory is gone: the rebuild (restore
    # mode, up to the group's offsets) reads 0 and 2 again, and must hold K's merged record in
    # 0 until 2 is read past its drain, as the live run did (2 holds more records than 0
    # before them: read side by side, 0 gets there first)
    world = World(tmp_path)
    world.put(0, A, 2)  # 0@0
    world.put(1, B, 2)  # 1@0
    world.put(3, C, 4)  # 3@0
    for _ in range(20):
        world.put(2, R, 4)  # 2@0..19
    for _ in range(3):
        world.put(2, K, 4)  # 2@20..22
    history = shrunk(world).with_drains({2: world.end(2) - 1, 3: 0})
    world.record(history)
    world.put(0, K, 2)  # 0@1: merged into 0, after 0's hold at 1
    for _ in range(5):
        world.put(0, A, 2)
    world.run(steps=400)
    assert world.committed(0) == world.end(0) and world.committed(2) == world.end(2)
    before = {key: world.state(key) for key in (A, B, K, C, R)}
    assert before[K] == {"n": 4, "last": {K.decode(): 4}, "bad": 0}
    shutil.rmtree(processor_path(world.app.config.app_state_dir, 0))
    world.run(steps=400)
    assert {key: world.state(key) for key in (A, B, K, C, R)} == before
