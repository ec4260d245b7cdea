"""The live loop with ``time.input_order: canonical``: a two-input app run for real
(``ProcessorRuntime``) on the in-memory Kafka applies each key's records in their canonical
order, whatever order they were fetched in, through restarts, aborted transactions and the
bounded wait (``framework.runtime.ordering``); with ``arrival`` it applies them as fetched."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework.growth.gates import Gates, Wait
from framework.kafka import TransactionAbortableError
from tests.framework.order import live_world as world
from tests.framework.order.live_world import CLICKS, VIEWS
from tests.sim.kafka import MemoryKafka, NoFaults


def _interleaved(kafka: MemoryKafka, key: bytes) -> None:
    """Clicks at 10, 30, 50, 70 ms; views at 20, 40, 60, 80 ms: every click is fetched before
    any view (the clicks partition is read first), the canonical order alternates."""
    for at in (10, 30, 50, 70):
        world.append(kafka, CLICKS, key, at)
    for at in (20, 40, 60, 80):
        world.append(kafka, VIEWS, key, at)


def test_arrival_applies_the_records_as_fetched_not_in_the_canonical_order(
    tmp_path: Path,
) -> None:
    """The control: the same logs with ``arrival`` give another order (so the test below
    shows the canonical order is what ``canonical`` adds)."""
    kafka = world.memory_kafka()
    _interleaved(kafka, b"k")
    run = world.Run(world.make_app(world.config(tmp_path, "arrival")), kafka)
    run.until({b"k": 8})
    [applied] = run.applied([b"k"])
    assert sorted(applied) == sorted(world.canonical(kafka, b"k"))
    assert applied != world.canonical(kafka, b"k")


@pytest.mark.parametrize("guarantee", ["exactly-once", "at-least-once"])
def test_canonical_applies_a_keys_records_in_the_canonical_order(
    tmp_path: Path, guarantee: str
) -> None:
    """The last view (80 ms) waits for the clicks partition to reach past 80: after
    ``max_input_wait`` a forced tick with floor 81 is written there, read back, and lets it
    go; every record is applied once, in the canonical order of the logs (forced tick
    included)."""
    kafka = world.memory_kafka()
    _interleaved(kafka, b"k")
    settings = world.config(tmp_path, "canonical", guarantee=guarantee)  # type: ignore[arg-type]
    run = world.Run(world.make_app(settings), kafka)
    run.until({b"k": 8})
    [applied] = run.applied([b"k"])
    assert applied == world.canonical(kafka, b"k")
    assert applied == [f"{t}@{o}" for o in range(4) for t in (CLICKS, VIEWS)]
    assert world.forced_ticks(kafka, CLICKS) == [81]
    assert world.forced_ticks(kafka, VIEWS) == []


class _FailingCommit(NoFaults):
    """The ``nth`` transaction commit fails (aborted: its batches are read again)."""

    def __init__(self, nth: int) -> None:
        self.nth = nth
        self.commits = 0

    def before(self, operation: str) -> str | None:
        if operation == "producer.commit":
            self.commits += 1
            if self.commits == self.nth:
                raise TransactionAbortableError("committing a transaction failed: test")
        return None


@pytest.mark.parametrize("in_flight", [1, 4])
def test_an_aborted_transaction_loses_no_record_the_merge_held(
    tmp_path: Path, in_flight: int
) -> None:
    """Each commit of the run in turn aborts (a run per commit): a pipelined batch's
    (``Pipeline.discard``), a lone batch's (``BatchLoop._rewind``, ``in_flight: 1``) or an
    idle batch's writing only a forced tick (``Pipeline.idle``), while the merge holds records
    read after the dropped ones. Every record is applied once, in the canonical order. (Each
    abort point lost records in an earlier attempt: held records were neither committed nor
    read again.)"""
    nth = 1
    while True:
        faults = _FailingCommit(nth)
        kafka = world.memory_kafka(faults)
        _interleaved(kafka, b"k")
        settings = world.config(tmp_path / str(nth), "canonical", in_flight=in_flight)
        run = world.Run(world.make_app(settings), kafka)
        run.until({b"k": 8})
        [applied] = run.applied([b"k"])
        assert applied == world.canonical(kafka, b"k"), nth
        assert len(applied) == 8
        if faults.commits <= nth:
            break
        nth += 1
    assert nth >= 3  # (commits enough to abort the first, a middle and the last)


def test_a_restart_resumes_with_the_stored_marks_and_reads_held_records_again(
    tmp_path: Path,
) -> None:
    """A run stops after the first records (the merge holds more, not committed); a later
    view arrives meanwhile; the next run reads the held records again from the state's
    offsets, with the marks stored there as bases, and goes on in the canonical order."""
    kafka = world.memory_kafka()
    _interleaved(kafka, b"k")
    settings = world.config(tmp_path, "canonical", max_records=2)
    run = world.Run(world.make_app(settings), kafka)
    run.until({b"k": 2})
    [first] = run.applied([b"k"])
    assert 2 <= len(first) < 8
    world.append(kafka, VIEWS, b"k", 90)
    world.append(kafka, CLICKS, b"k", 85)
    run.until({b"k": 10})
    [applied] = run.applied([b"k"])
    assert applied[: len(first)] == first
    assert applied == world.canonical(kafka, b"k")


class _Died(BaseException):
    """The process died here (as a SIGKILL would end it)."""


class _DiesOnce(NoFaults):
    """The process dies at the ``nth`` time it reaches ``point``."""

    def __init__(self, point: str, nth: int) -> None:
        self.point, self.nth, self.seen = point, nth, 0

    def before(self, operation: str) -> str | None:
        if operation == self.point:
            self.seen += 1
            if self.seen == self.nth:
                raise _Died(operation)
        return None


@pytest.mark.parametrize("point", ["producer.commit", "producer.committed"])
def test_a_death_at_any_commit_resumes_in_the_canonical_order(tmp_path: Path, point: str) -> None:
    """The process dies before a transaction commits, or after it and before the state's
    write (the group's offsets then run ahead of the state: the restart rebuilds that gap
    without output, through the merge too), at each commit in turn; a restart over the same
    state goes on. Every record is applied once, in the canonical order."""
    nth = 1
    while True:
        faults = _DiesOnce(point, nth)
        kafka = world.memory_kafka(faults)
        _interleaved(kafka, b"k")
        settings = world.config(tmp_path / str(nth), "canonical", in_flight=2)
        run = world.Run(world.make_app(settings), kafka)
        try:
            run.until({b"k": 8})
        except _Died:
            run.until({b"k": 8})
        [applied] = run.applied([b"k"])
        assert applied == world.canonical(kafka, b"k"), nth
        if faults.seen <= nth:
            break
        nth += 1
    assert nth >= 3


def test_a_record_a_gate_holds_is_read_again_into_the_merge_not_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gate (``framework.runtime.holds``) holds views@1 for the first checks: its partition
    is paused there and read again from it once the gate opens. The merge only ever sees
    records past the gates (``BatchRunner.admit`` cuts before ``InputOrder.take``), so
    nothing it released is cut afterwards and lost; every record is applied once, in the
    canonical order."""
    checks = {"left": 6}

    def pending(_self: Gates, topic: str, _partition: int, offset: int) -> bool:
        return topic == VIEWS and offset == 1 and checks["left"] > 0

    def waits(_self: Gates, topic: str, partition: int, *_args: object) -> Wait | None:
        checks["left"] -= 1
        return Wait(topic, partition, partition + 1, 1) if checks["left"] >= 0 else None

    monkeypatch.setattr(Gates, "pending", pending)
    monkeypatch.setattr(Gates, "waits", waits)
    kafka = world.memory_kafka()
    _interleaved(kafka, b"k")
    run = world.Run(world.make_app(world.config(tmp_path, "canonical")), kafka)
    run.until({b"k": 8})
    [applied] = run.applied([b"k"])
    assert checks["left"] < 0  # (the gate held, then opened)
    assert applied == world.canonical(kafka, b"k")
