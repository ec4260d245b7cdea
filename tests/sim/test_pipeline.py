"""Pipelined batches (``batch.in_flight``) on the in-memory Kafka: a batch commits only once
Kafka answered for its outputs (or its transaction committed), a crash with batches in flight
loses only those, a transaction shared by several batches that aborts has them all read
again, and a broker's size refusal has the batches read again one waiting batch at a time.
The real broker runs the same code in the integration tests (``in_flight`` is 4 by default)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

import orjson
import pytest

from framework import App
from framework.errors import SplitstateError
from framework.growth.lease import RegistryLease
from framework.kafka import KafkaIOError, ProducerFencedError, TransactionAbortableError
from framework.processing import ProcessorStoppedError, RecordProcessor
from framework.runtime import sending
from framework.runtime.delivery import BatchWriter
from framework.runtime.loop import ProcessorRuntime, RuntimeStats
from statestore import ProcessorDatabase, processor_path
from tests.sim.app import INPUT, OUTPUT
from tests.sim.kafka import MemoryKafka
from tests.sim.one_key import KEY, one_key_world
from tests.sim.producer import MemoryProducer
from tests.sim.transactions import MemoryTransactionalProducer

RECORDS = 40


def _world(tmp_path: Path, *, exactly_once: bool) -> tuple[MemoryKafka, App]:
    """``RECORDS`` records of one key, the fold app with 4 batches of 5 records in flight."""
    return one_key_world(tmp_path, records=RECORDS, seed=3, exactly_once=exactly_once, in_flight=4)


class _AllDone:
    """``until`` for a run: every record processed; fails a run that never gets there."""

    def __init__(self) -> None:
        self.steps = 0

    def __call__(self, stats: RuntimeStats) -> bool:
        self.steps += 1
        assert self.steps < 5_000, f"only {stats.records} of {RECORDS} records processed"
        return stats.records >= RECORDS


def _state(app: App) -> tuple[dict[tuple[str, int], int], object]:
    """The committed input offsets and the key's fold, as written to disk."""
    path = processor_path(app.config.app_state_dir, 0)
    database = ProcessorDatabase.open_read_only(path)
    try:
        return database.offsets(), database.get("folds", KEY)
    finally:
        database.close()


def _output_seqs(kafka: MemoryKafka) -> list[int]:
    records = [*kafka.broker.records(OUTPUT, 0), *kafka.broker.records(OUTPUT, 1)]
    return [orjson.loads(r.value or b"")[1] for r in records if kafka.broker.visible(r)]


def test_a_crash_with_batches_in_flight_loses_only_the_unacknowledged_ones(
    tmp_path: Path,
) -> None:
    """Kafka never answers the first run's outputs: its batches stay in flight, none commits,
    and the run ends for want of acknowledgements. The restart processes every record again
    from the state's offsets: exact state, each output at least once and in order."""
    kafka, app = _world(tmp_path, exactly_once=False)
    with (
        mock.patch.object(MemoryProducer, "_serve", return_value=0),
        pytest.raises(SplitstateError, match="unacknowledged"),
    ):
        ProcessorRuntime(app, 0, kafka=kafka).run(until=_AllDone())
    offsets, fold = _state(app)
    assert offsets.get((INPUT, 0), 0) == 0  # nothing committed: no batch was answered for
    assert fold is None
    first_run = _output_seqs(kafka)
    assert first_run == list(range(1, 21))  # 4 batches of 5 were in flight
    stats = ProcessorRuntime(app, 0, kafka=kafka).run(until=_AllDone())
    assert stats.records == RECORDS
    offsets, fold = _state(app)
    assert offsets[(INPUT, 0)] == RECORDS
    assert fold == {"n": RECORDS, "last": {"p": RECORDS}, "bad": 0}
    assert _output_seqs(kafka)[len(first_run) :] == list(range(1, RECORDS + 1))


def test_batches_share_a_transaction_and_an_abort_reads_all_of_them_again(
    tmp_path: Path,
) -> None:
    """Under exactly-once the batches in flight go into one transaction (fewer commits than
    batches); a commit that fails aborts it, drops every batch in it, and reads them again:
    each output exactly once, and the state exact."""
    kafka, app = _world(tmp_path, exactly_once=True)
    commit = MemoryTransactionalProducer.commit
    calls: list[int] = []

    def fails_once(self: MemoryTransactionalProducer, timeout: float) -> None:
        calls.append(self.written)
        if len(calls) == 1:
            raise TransactionAbortableError("committing a transaction failed: not now")
        commit(self, timeout)

    with mock.patch.object(MemoryTransactionalProducer, "commit", fails_once):
        stats = ProcessorRuntime(app, 0, kafka=kafka).run(until=_AllDone())
    assert stats.records == RECORDS
    assert calls[0] == 20  # the aborted transaction held 4 batches of 5 outputs
    assert len(calls) < 1 + RECORDS // 5  # batches shared transactions
    assert _output_seqs(kafka) == list(range(1, RECORDS + 1))
    offsets, fold = _state(app)
    assert offsets[(INPUT, 0)] == RECORDS
    assert fold == {"n": RECORDS, "last": {"p": RECORDS}, "bad": 0}


def test_a_size_refusal_in_flight_reads_the_batches_again_one_waiting_batch_at_a_time(
    tmp_path: Path,
) -> None:
    """The broker refuses one output for its size (the topic's limit is lower than the
    producer's): the batches in flight are dropped and read again; the refused output becomes
    a dead letter and every other output is written, the state exact."""
    kafka, app = _world(tmp_path, exactly_once=False)
    refuse = {b'["p",7,'}  # the output of record 7 is refused once it reaches the broker
    write = MemoryProducer._write

    def refusing(self: MemoryProducer, item: object) -> object:
        record = item.record  # type: ignore[attr-defined]
        if record["value"] and record["value"][:7] in refuse:
            kafka.broker.topic(OUTPUT).configs["max.message.bytes"] = "10"
            try:
                return write(self, item)  # type: ignore[arg-type]
            finally:
                del kafka.broker.topic(OUTPUT).configs["max.message.bytes"]
        return write(self, item)  # type: ignore[arg-type]

    with mock.patch.object(MemoryProducer, "_write", refusing):
        stats = ProcessorRuntime(app, 0, kafka=kafka).run(until=_AllDone())
    assert stats.dead_letters == 1
    seqs = _output_seqs(kafka)
    assert 7 not in seqs
    assert sorted(set(seqs)) == [s for s in range(1, RECORDS + 1) if s != 7]
    topic = app.config.dead_letters
    letters = [
        r
        for p in range(kafka.broker.partition_count(topic))
        for r in kafka.broker.records(topic, p)
    ]
    assert [r.value for r in letters] == [b"p:7"]
    offsets, fold = _state(app)
    assert offsets[(INPUT, 0)] == RECORDS
    assert fold == {"n": RECORDS, "last": {"p": RECORDS}, "bad": 0}


def test_a_stop_on_error_commits_the_batches_before_the_failed_record(tmp_path: Path) -> None:
    """With ``on_error: stop`` a record that fails stops the processor with the state at the
    batch before it (as its message says): the batches in flight before it commit first."""
    kafka, app = _world(tmp_path, exactly_once=False)
    poisoned = kafka.broker.partition((INPUT, 0)).records
    poisoned[12] = replace(poisoned[12], value=b"p:13:poison")
    app.configure(app.config.model_copy(update={"on_error": "stop"}))
    poll = MemoryProducer.poll

    def slow_acks(self: MemoryProducer, timeout: float = 0.0) -> int:
        return poll(self, timeout) if timeout > 0 else 0  # no answer without waiting

    with (
        mock.patch.object(MemoryProducer, "poll", slow_acks),
        pytest.raises(ProcessorStoppedError, match="sim-in\\[0\\]@12"),
    ):
        ProcessorRuntime(app, 0, kafka=kafka).run(until=_AllDone())
    offsets, fold = _state(app)
    assert offsets[(INPUT, 0)] == 10  # batches 1-5 and 6-10 committed; 11-15 holds record 13
    assert fold == {"n": 10, "last": {"p": 10}, "bad": 0}


def test_a_send_that_fails_abortably_reads_its_own_batch_again(tmp_path: Path) -> None:
    """The producer refuses the first output of a new transaction (nothing else in flight)
    with an abortable error: the batch being sent is read again too, not only the batches in
    flight (a review found its records skipped)."""
    kafka, app = _world(tmp_path, exactly_once=True)
    real_send = sending.send
    calls: list[int] = []

    def failing_send(
        writer: BatchWriter, outputs: list[Any], dead: list[Any], source: Any
    ) -> sending.Sending:
        calls.append(len(outputs))
        if len(calls) == 5:
            raise TransactionAbortableError("producing failed: transaction in abortable state")
        return real_send(writer, outputs, dead, source)

    with mock.patch("framework.runtime.pipeline.send", failing_send):
        ProcessorRuntime(app, 0, kafka=kafka).run(until=_AllDone())
    offsets, fold = _state(app)
    assert offsets[(INPUT, 0)] == RECORDS
    assert fold == {"n": RECORDS, "last": {"p": RECORDS}, "bad": 0}
    assert _output_seqs(kafka) == list(range(1, RECORDS + 1))


#: librdkafka's default transaction.timeout.ms (what framework/kafka/clients.py sets at least)
TRANSACTION_TIMEOUT = 60.0


def test_a_slow_function_does_not_keep_a_transaction_open_past_its_timeout(
    tmp_path: Path,
) -> None:
    """13 s per record, 5 records a batch: a transaction left open while the next batch is
    processed would outlive transaction.timeout.ms (the broker aborts it, librdkafka says
    "fenced", the processor restarts into the same, for ever; a review found it). It is
    committed before the next batch instead."""
    kafka, app = _world(tmp_path, exactly_once=True)
    clock = kafka.clock
    process = RecordProcessor.process

    def slow(self: RecordProcessor, batch: Any, message: Any, **kwargs: Any) -> Any:
        if not kwargs.get("restore"):
            clock.sleep(13.0)
        return process(self, batch, message, **kwargs)

    begin, commit = MemoryTransactionalProducer.begin, MemoryTransactionalProducer.commit
    opened: dict[int, float] = {}
    durations: list[float] = []

    def timed_begin(self: MemoryTransactionalProducer) -> None:
        begin(self)
        opened[id(self)] = clock.monotonic()

    def timed_commit(self: MemoryTransactionalProducer, timeout: float) -> None:
        durations.append(clock.monotonic() - opened.pop(id(self)))
        if durations[-1] > TRANSACTION_TIMEOUT:  # the broker aborted it meanwhile
            raise ProducerFencedError("committing a transaction failed: PRODUCER_FENCED")
        commit(self, timeout)

    with (
        mock.patch.object(RecordProcessor, "process", slow),
        mock.patch.object(RegistryLease, "fresh", lambda _self: True),
        mock.patch.object(MemoryTransactionalProducer, "begin", timed_begin),
        mock.patch.object(MemoryTransactionalProducer, "commit", timed_commit),
    ):
        ProcessorRuntime(app, 0, kafka=kafka).run(until=lambda s: s.records >= 10)
    offsets, _fold = _state(app)
    assert offsets[(INPUT, 0)] >= 10
    assert max(durations) < TRANSACTION_TIMEOUT / 2


@pytest.mark.parametrize("exactly_once", [False, True])
def test_output_limits_that_cannot_be_read_stop_only_exactly_once(
    tmp_path: Path, exactly_once: bool
) -> None:
    """Reading the output topics' max.message.bytes needs DescribeConfigs: at-least-once runs
    without it (nothing measured before producing), exactly-once cannot (a refusal would fail
    every transaction) and says why."""
    kafka, app = one_key_world(tmp_path, records=10, seed=4, exactly_once=exactly_once)
    read = MemoryKafka.topic_configs

    def refused(self: MemoryKafka, topics: list[str]) -> dict[str, dict[str, str | None]]:
        if OUTPUT in topics:
            raise KafkaIOError(
                f"could not read the config of {OUTPUT!r}: TOPIC_AUTHORIZATION_FAILED"
            )
        return read(self, topics)

    with mock.patch.object(MemoryKafka, "topic_configs", refused):
        if exactly_once:
            with pytest.raises(KafkaIOError, match="TOPIC_AUTHORIZATION_FAILED"):
                ProcessorRuntime(app, 0, kafka=kafka).run(until=lambda s: s.records >= 10)
            return
        stats = ProcessorRuntime(app, 0, kafka=kafka).run(until=lambda s: s.records >= 10)
    assert stats.records == 10
    assert _output_seqs(kafka) == list(range(1, 11))
