"""Inputs that are another app's exactly-once output (the README allows it): their partitions
hold transaction markers and aborted records, offsets a ``read_committed`` consumer passes
over without a record. Nothing may wait for a record at such an offset, and no offset
comparison may count them as records not processed yet."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import Producer

from framework import App
from framework.coordination.scaling import read_control, request_scale
from framework.loader import load_app
from framework.ops.status import collect_status
from framework.runtime.loop import ProcessorRuntime
from rebalance import bucket, key_hash
from statestore import ProcessorDatabase, processor_path
from tests.integration.harness import create_app, produce, unique, wait_for

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
