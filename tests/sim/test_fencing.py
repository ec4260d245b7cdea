"""Exactly-once edges a review found: an instance of the old owner that a newer instance of the
same processor fenced must not commit F (moving the group's offsets back under what the newer
one emitted) nor write RELEASE; a fenced receiver must not hold its scale back; transactions
that never commit must not be retried at once for ever."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, cast
from unittest import mock

import pytest

from framework import App
from framework.coordination.control_log import ControlLog
from framework.kafka import (
    KafkaIOError,
    ProducerFencedError,
    TopicSpec,
    TransactionAbortableError,
)
from framework.processing import ProcessorFencedError, ProcessorStoppedError
from framework.runtime.clients import transactional_id
from framework.runtime.completions import Completions
from framework.runtime.handoffs import HandoffCoordinator, Release
from framework.runtime.loop import ProcessorRuntime
from rebalance import HandoffPhase
from rebalance.control import ControlState, Handoff
from rebalance.control_records import instance_record
from statestore import DatabaseIdentity, ProcessorDatabase
from tests.clocks import ManualClock
from tests.rebalance.test_control import scale, started
from tests.sim.app import INPUT, OUTPUT, make_app
from tests.sim.broker import Broker
from tests.sim.kafka import MemoryKafka
from tests.sim.one_key import one_key_world
from tests.sim.transactions import MemoryTransactionalProducer


class _Log:
    """A control log that remembers what was appended."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def append(self, record: dict[str, Any]) -> None:
        self.records.append(record)


def test_a_fenced_old_owner_neither_moves_the_group_back_nor_writes_release(
    tmp_path: Path,
) -> None:
    kafka = MemoryKafka(Broker(random.Random(0)), ManualClock())
    kafka.create_topics([TopicSpec(INPUT, 2)])
    app = make_app(
        tmp_path, partitions=2, initial_processors=1, max_records=5, lease_ms=2000, ready_lag=0
    )
    group, moved = app.config.app_id, (INPUT, 1)
    consumer = kafka.consumer(group)
    zombie = kafka.transactional_producer(transactional_id(group, 0))
    newer = kafka.transactional_producer(transactional_id(group, 0))  # fences the zombie
    newer.begin()  # the newer instance emitted up to 12 and committed that
    newer.send_offsets({moved: 12}, consumer)
    newer.commit(30)
    log = _Log()
    identity = DatabaseIdentity(group, 0, {"initial_processors": 1})
    state = started(1).apply(instance_record(0, "zombie"))
    database = ProcessorDatabase.in_memory(identity, [])
    coordinator = HandoffCoordinator(
        app,
        0,
        watcher=cast(Any, _Watcher(state)),
        control=cast(Any, log),
        database=database,
        records=cast(Any, None),
        kafka=kafka,
        consumer=consumer,
        instance="zombie",
        completions=Completions(0, database, state),
        transactions=zombie,
    )
    handoff = Handoff(0, 1, (moved,), HandoffPhase.READY)
    with pytest.raises(ProcessorFencedError, match="another instance of processor 0"):
        coordinator.release(Release(1, handoff, frozenset({moved}), {moved: 10}))
    assert consumer.committed([moved]) == {moved: 12}
    assert log.records == []


class _Watcher:
    """A control watcher whose state is fixed."""

    def __init__(self, state: ControlState) -> None:
        self.state = state


def test_a_fenced_receiver_does_not_report_a_stop_that_would_hold_the_scale_back(
    tmp_path: Path,
) -> None:
    """A ``stopped`` record of the scale's receiver holds back every release of the scale;
    the instance that fenced the stopping one is the receiver now and goes on."""
    kafka = MemoryKafka(Broker(random.Random(0)), ManualClock())
    app = make_app(
        tmp_path, partitions=4, initial_processors=2, max_records=5, lease_ms=2000, ready_lag=0
    )
    state = scale(started(2), 1, 3).apply(instance_record(2, "run"))  # 2 receives from 0

    def coordinator(log: _Log) -> HandoffCoordinator:
        identity = DatabaseIdentity(app.config.app_id, 2, {"initial_processors": 2})
        database = ProcessorDatabase.in_memory(identity, [])
        return HandoffCoordinator(
            app,
            2,
            watcher=cast(Any, _Watcher(state)),
            control=cast(Any, log),
            database=database,
            records=cast(Any, None),
            kafka=kafka,
            consumer=kafka.consumer(app.config.app_id),
            instance="run",
            completions=Completions(2, database, state),
        )

    fenced_log, stopped_log = _Log(), _Log()
    coordinator(fenced_log).report_stop(ProcessorFencedError("fenced"))
    coordinator(stopped_log).report_stop(ProcessorStoppedError("a record failed"))
    assert fenced_log.records == []
    assert [r["type"] for r in stopped_log.records] == ["stopped"]


def _one_processor_exactly_once(tmp_path: Path) -> tuple[MemoryKafka, App]:
    """An input partition holding three records, and the fold app under exactly-once."""
    return one_key_world(tmp_path, records=3, seed=1, exactly_once=True)


def test_transactions_that_never_commit_end_the_run_after_a_few_tries(tmp_path: Path) -> None:
    """A write that always fails (say, a refused authorization) aborts each batch's
    transaction: the batch is read again a few times, then the processor exits (to be
    restarted with backoff), instead of retrying at once for ever (a review found that)."""
    kafka, app = _one_processor_exactly_once(tmp_path)
    refused = TransactionAbortableError("committing a transaction failed: not authorized")
    with (
        mock.patch.object(MemoryTransactionalProducer, "commit", side_effect=refused),
        pytest.raises(KafkaIOError, match="5 transactions in a row could not commit"),
    ):
        ProcessorRuntime(app, 0, kafka=kafka).run()
    assert kafka.broker.committed_records(OUTPUT) == []  # written, then aborted: none is read


def test_a_fencing_found_only_when_aborting_stops_the_processor_as_fenced(
    tmp_path: Path,
) -> None:
    """librdkafka's ``produce`` on a fenced producer says only "fatal error"; the abort that
    follows says "fenced": the processor stops as fenced (exit 4, not restarted), not with a
    Kafka error its supervisor would restart (seen on the real broker)."""
    kafka, app = _one_processor_exactly_once(tmp_path)
    fencing = ProducerFencedError("aborting a transaction failed: fenced by a newer instance")

    def fatal(*_args: object, **_kwargs: object) -> None:
        # another run of processor 0 started (and recorded itself) since this one
        ControlLog(kafka, app.config.control_topic).append(instance_record(0, "newer"))
        raise KafkaIOError("Unable to produce message: Local: Fatal error")

    with (
        mock.patch.object(MemoryTransactionalProducer, "produce", side_effect=fatal),
        mock.patch.object(MemoryTransactionalProducer, "abort", side_effect=fencing),
        pytest.raises(ProcessorFencedError, match="another instance of processor 0"),
    ):
        ProcessorRuntime(app, 0, kafka=kafka).run()


def test_a_fencing_without_a_newer_run_is_a_timed_out_transaction_and_restarts(
    tmp_path: Path,
) -> None:
    """librdkafka reports a transaction the broker aborted for its timeout as "fenced" too
    (a review found it): with no newer run of the processor in the control log, the processor
    exits to be restarted (a Kafka error), not stopped for good."""
    kafka, app = _one_processor_exactly_once(tmp_path)
    fencing = ProducerFencedError("committing a transaction failed: fenced by a newer instance")
    with (
        mock.patch.object(MemoryTransactionalProducer, "commit", side_effect=fencing),
        pytest.raises(KafkaIOError, match="no newer run of it started"),
    ):
        ProcessorRuntime(app, 0, kafka=kafka).run()


def test_a_broker_without_transactions_is_named_with_the_fix(tmp_path: Path) -> None:
    """Exactly-once needs a broker that runs transactions: when the transactional producer
    cannot start, the error names what the broker needs and the way out."""
    kafka, app = _one_processor_exactly_once(tmp_path)
    refused = KafkaIOError("initialising transactions failed: Broker: Coordinator not available")
    with (
        mock.patch.object(MemoryKafka, "transactional_producer", side_effect=refused),
        pytest.raises(KafkaIOError) as raised,
    ):
        ProcessorRuntime(app, 0, kafka=kafka).run()
    text = str(raised.value)
    assert "could not start Kafka transactions for exactly-once outputs" in text
    assert "transaction.state.log.replication.factor=1" in text
    assert "processing_guarantee: at-least-once" in text
