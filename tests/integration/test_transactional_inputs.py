"""Inputs that are another app's exactly-once output (the README allows it): their partitions
hold transaction markers and aborted records, offsets a ``read_committed`` consumer passes
over without a record. Nothing may wait for a record at such an offset, and no offset
comparison may count them as records not processed yet."""

from __future__ import annotations

import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from framework import App
from framework.coordination.registry import TopicRegistry
from framework.coordination.scaling import read_control, request_scale
from framework.growth.expand import expand_topic
from framework.kafka import Clients
from framework.loader import load_app
from framework.ops.status import collect_status
from framework.producer import SplitstateProducer
from framework.runtime.loop import ProcessorRuntime
from rebalance import HandoffEvent, bucket, key_hash
from statestore import ProcessorDatabase, processor_path
from tests.integration.catchup_world import World, hand_over, send
from tests.integration.harness import (
    Supervised,
    TopicReader,
    counts_by_word,
    create_app,
    produce,
    unique,
    wait_for,
)

pytestmark = pytest.mark.integration

APP = "examples.wordcount.app:app"


class Running:
    """A processor's run in a thread of the test (stopped as a SIGTERM would stop it)."""

    def __init__(self, app: App, processor: int) -> None:
        self.runtime = ProcessorRuntime(app, processor)
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=f"processor-{processor}")

    def _run(self) -> None:
        try:
            self.runtime.run()
        except BaseException as error:  # reported by the test
            self.failure = error

    def check(self) -> None:
        """Fail the test with the run's error, if it ended with one."""
        if self.failure is not None:
            raise AssertionError(f"processor stopped: {self.failure!r}") from self.failure


@contextmanager
def running(app: App, processor: int) -> Iterator[Running]:
    """Run processor ``processor`` of ``app`` for the block."""
    run = Running(app, processor)
    run.thread.start()
    try:
        yield run
    finally:
        run.runtime.request_stop()
        run.thread.join(60)
    run.check()


def keys_of(partition: int, partitions: int, count: int) -> list[bytes]:
    """``count`` keys that the linear-hash producer places on ``partition``."""
    keys = (f"w{i}".encode() for i in range(10 * partitions * count))
    return [k for k in keys if bucket(key_hash(k), partitions, partitions) == partition][:count]


def transaction(
    bootstrap: str, topic: str, partition: int, keys: list[bytes], *, commit: bool, count: int = 2
) -> None:
    """An upstream exactly-once app writes ``keys`` to ``topic[partition]`` (of ``count``
    partitions) in a transaction that commits or aborts: its records and its marker take
    offsets."""
    upstream = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"upstream-{uuid.uuid4().hex}"}
    )
    upstream.init_transactions(30)
    upstream.begin_transaction()
    header: list[tuple[str, str | bytes | None]] = [("splitstate.count", str(count).encode())]
    for key in keys:
        upstream.produce(topic, b"", key, partition=partition, headers=header)
    upstream.flush(30)
    if commit:
        upstream.commit_transaction(30)
    else:
        upstream.abort_transaction(30)


def counts(app: App, processor: int) -> dict[bytes, int]:
    """The counts in processor ``processor``'s state (its run stopped)."""
    database = ProcessorDatabase.open_read_only(processor_path(app.config.app_state_dir, processor))
    try:
        return dict(database.items("counts"))
    finally:
        database.close()


def test_a_scale_finishes_when_a_moved_partition_holds_only_aborted_records(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    """Scale 1 -> 2 while partition 1 holds nothing but an aborted transaction: the old owner
    read past it without a record (its state has no offset there) and releases where its
    consumer got to; the receiver reads to that F without a record either and completes.
    (It used to wait for ever for a record "not read yet" at the aborted offsets.)"""
    words = unique("words")
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
        app_id=unique("aborted-only"),
        inputs=[{"topic": words, "partitions": 2}],
        outputs=[{"topic": unique("counts"), "partitions": 2}],
        initial_processors=1,
        processors=1,
        bootstrap="replay",
        snapshots={"enabled": False},
        scaling={"ready_lag": 0},
    )
    app = load_app(APP, config)
    mine, moved = keys_of(0, 2, 5), keys_of(1, 2, 5)
    produce(kafka_bootstrap, words, ((key, b"") for key in mine * 4))
    transaction(kafka_bootstrap, words, 1, moved, commit=False)
    with running(app, 0) as first:
        wait_for(lambda: first.runtime.stats.records >= 20, 60, "processor 0 to count")
        request_scale(app, 2)
        with running(app, 1) as second:

            def scaled() -> bool:
                first.check()
                second.check()
                return read_control(app).scaling is None

            wait_for(scaled, 60, "the scale 1 -> 2 to finish")
            # partition 1 is processor 1's now; its first committed records count from 1
            produce(kafka_bootstrap, words, ((key, b"") for key in moved))
            wait_for(lambda: second.runtime.stats.records >= len(moved), 60, "processor 1")
    assert read_control(app).processors == 2
    assert counts(app, 0) == dict.fromkeys(mine, 4)
    assert counts(app, 1) == dict.fromkeys(moved, 1)


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_lag_is_zero_once_a_transactional_input_is_read(
    tmp_path: Path, kafka_bootstrap: str, guarantee: str
) -> None:
    """A committed transaction of 5 records, then an aborted one of 3: the partition ends at
    offset 10 (2 markers, 3 aborted records). Once the processor applied the 5 records it is
    at the end: its state's offset, the group's (T1) and status's lag say so. They used to
    stop at 5, one past the last record, and status showed a lag of 5 for ever."""
    words = unique("words")
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
        app_id=unique("marker-lag"),
        bootstrap="replay",
        inputs=[{"topic": words, "partitions": 1}],
        outputs=[{"topic": unique("counts"), "partitions": 1}],
        initial_processors=1,
        processors=1,
        snapshots={"enabled": False},
        processing_guarantee=guarantee,
    )
    app = load_app(APP, config)
    keys = [f"w{i}".encode() for i in range(5)]
    transaction(kafka_bootstrap, words, 0, keys, commit=True, count=1)
    transaction(kafka_bootstrap, words, 0, keys[:3], commit=False, count=1)
    position = (words, 0)

    def lag() -> int:
        [processor] = collect_status(app).processors
        [partition] = processor.partitions
        assert partition.end == 10
        return partition.lag

    with running(app, 0) as run:
        wait_for(lambda: run.runtime.stats.records >= 5, 60, "the committed records")
        wait_for(lambda: lag() == 0, 20, "status's lag to be 0")
    assert run.runtime.stats.records == 5
    assert counts(app, 0) == dict.fromkeys(keys, 1)
    database = ProcessorDatabase.open_read_only(processor_path(app.config.app_state_dir, 0))
    try:
        assert database.offsets() == {position: 10}  # what metrics' lag and F are read from
    finally:
        database.close()


def test_a_catch_up_reads_to_t1_and_f_past_transaction_markers(
    kafka_bootstrap: str, kafka_admin: AdminClient
) -> None:
    """The old owner's offsets follow its consumer past markers and aborted records, so T1
    and F lie past the last record: the receiver is caught up, and finished, when its own
    consumer passed them (it waited for a record there for ever)."""
    world = World(kafka_bootstrap, kafka_admin, partitions=2, initial=2, b=1)
    moved = keys_of(1, 2, 6)
    transaction(kafka_bootstrap, world.topic, 1, moved, commit=True)  # offsets 0-5, marker 6
    transaction(kafka_bootstrap, world.topic, 1, moved[:3], commit=False)  # 7-9, marker 10
    world.commit_group({1: 7})  # T1: the old owner read past the commit marker
    state = send(world.control(1, 2), 0, 1, HandoffEvent.START_CATCH_UP)
    database = world.database(1)
    catchup = world.catch_up(1, state, database)
    try:
        hand_over(state, catchup, 0, 1, {(world.topic, 1): 11})  # F: the partition's end
    finally:
        catchup.close()
    assert world.state(database, moved) == dict.fromkeys(moved, 1)
    assert database.progress(catchup.scope) == {(world.topic, 1): 11}


class Flow(threading.Thread):
    """Keeps writing committed records of ``key`` to the input: a backlog, then a steady
    flow (the processor's loop never finds its input idle)."""

    def __init__(self, bootstrap: str, topic: str, key: bytes) -> None:
        super().__init__(name="flow", daemon=True)
        self.producer = SplitstateProducer({"bootstrap.servers": bootstrap}, [topic])
        self.topic, self.key = topic, key
        self.stop = threading.Event()
        self.written = 0

    def run(self) -> None:
        while not self.stop.is_set():
            self.producer.produce(self.topic, self.key, b"")
            self.producer.poll(0)
            self.written += 1
            if self.written > 3000:
                time.sleep(0.002)
        self.producer.close(30)


def test_a_lost_state_is_rebuilt_to_a_group_offset_past_a_commit_marker(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    """The group's offset of partition 0 is past its last record (a commit marker follows
    it). A processor that lost its state directory rebuilds the partition up to there; with
    no record at that offset, the rebuild ends where its consumer passed it, even while
    partition 1 keeps it busy: it is ready again, not "restoring" until a new record
    arrives."""
    words = unique("words")
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
        app_id=unique("marker-rebuild"),
        inputs=[{"topic": words, "partitions": 2}],
        outputs=[{"topic": unique("counts"), "partitions": 2}],
        initial_processors=1,
        processors=1,
        bootstrap="replay",
        snapshots={"enabled": False},
        metrics={"port": 0},
    )
    app = load_app(APP, config)
    rebuilt = keys_of(0, 2, 5)
    transaction(kafka_bootstrap, words, 0, rebuilt, commit=True)  # offsets 0-4, marker 5
    kafka = Clients({"bootstrap.servers": kafka_bootstrap})
    with running(app, 0) as run, kafka.consumer(app.config.app_id) as group:
        position = (words, 0)
        wait_for(lambda: group.committed([position]) == {position: 6}, 60, "T1 past the marker")
    kafka.close()
    assert run.runtime.stats.records == 5
    shutil.rmtree(processor_path(app.config.app_state_dir, 0))  # the disk is lost
    flow = Flow(kafka_bootstrap, words, keys_of(1, 2, 1)[0])
    flow.start()
    wait_for(lambda: flow.written > 3000, 30, "a backlog on partition 1")
    try:
        with running(app, 0) as run:

            def ready() -> bool:
                run.check()
                metrics = run.runtime.metrics
                return metrics is not None and metrics.readiness()[0]

            wait_for(ready, 30, "the rebuilt processor to be ready")
            assert run.runtime.stats.restored == 5
    finally:
        flow.stop.set()
        flow.join(30)
    assert counts(app, 0)[rebuilt[0]] == 1


def _quiet(_what: object) -> None:
    """Neither a report line nor a wait (the fence's wait is not what is tested)."""


def test_a_resumed_expand_does_not_wait_a_minute_on_a_transactional_tail(
    kafka_bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    """`expand` resumed after its fence looks for its marker in each parent from the fence's
    end to the partition's end. A parent whose last offset is a commit marker has no record
    there: the search waited a minute for one, for each such parent."""
    topic = topic_factory(partitions=2)
    kafka = Clients({"bootstrap.servers": kafka_bootstrap})
    try:
        TopicRegistry(kafka).ensure_topic()
        TopicRegistry(kafka).register(topic, 2)
        expand_topic(kafka, topic, 4, report=_quiet, wait=_quiet, stop_after="fenced")
        transaction(kafka_bootstrap, topic, 0, keys_of(0, 2, 3), commit=True)
        started = time.monotonic()
        entry = expand_topic(kafka, topic, 4, report=_quiet, wait=_quiet)
    finally:
        kafka.close()
    assert time.monotonic() - started < 20
    assert entry.growth is None and entry.history.thresholds[2] == 4  # after the marker


def test_a_crash_between_passing_over_and_the_group_commit_loses_nothing(
    tmp_path: Path,
    kafka_bootstrap: str,
    kafka_admin: AdminClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Exactly-once; retention deleted the partition's first records before the app read it,
    then an aborted transaction follows. The processor passes over it (state offset 7) and is
    killed before the group's commit. Restarted, it resumes at 7 and commits it: had the group
    been first, it would find the group at 7 over a state with no offset, demand a rebuild
    from offset 0 that retention made impossible, and stop."""
    monkeypatch.setenv("SPLITSTATE_FAULT", "0:pass-over:written")
    words, out, app_id = unique("words"), unique("counts"), unique("pass-crash")
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
        app_id=app_id,
        inputs=[{"topic": words, "partitions": 1}],
        outputs=[{"topic": out, "partitions": 1}],
        initial_processors=1,
        processors=1,
        bootstrap="replay",
        snapshots={"enabled": False},
    )
    keys = [f"w{i}".encode() for i in range(3)]
    produce(kafka_bootstrap, words, ((key, b"") for key in keys))  # offsets 0-2
    futures = kafka_admin.delete_records([TopicPartition(words, 0, 3)])
    for future in futures.values():
        future.result(timeout=30)
    transaction(kafka_bootstrap, words, 0, keys, commit=False, count=1)  # 3-5, marker 6
    runner = Supervised(APP, config, tmp_path / "state", tmp_path / "run.log")
    reader = TopicReader(kafka_bootstrap, out, 1)
    try:
        state_dir = load_app(APP, config).config.app_state_dir
        marker = state_dir / ".fault-0-pass-over-written"
        wait_for(marker.exists, 60, "processor 0 to pass over the aborted transaction")
        produce(kafka_bootstrap, words, ((key, b"") for key in keys))  # offsets 7-9
        reader.wait_for(lambda r: len(r.records) == 3, 60, "the outputs of 7-9")
    finally:
        assert runner.stop() == 0, runner.output()[-3000:]
        reader.close()
    log = runner.output()
    assert "processor 0 exited with status -9; restarting" in log, log[-3000:]
    assert "cannot read on" not in log
    assert counts_by_word(reader.records) == {key.decode(): [1] for key in keys}
    kafka = Clients({"bootstrap.servers": kafka_bootstrap})
    try:
        with kafka.consumer(app_id) as group:
            assert group.committed([(words, 0)]) == {(words, 0): 10}
    finally:
        kafka.close()
