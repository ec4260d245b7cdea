"""A receiver's catch-up of a canonical two-input app applies the keys it gains in their
canonical order, as their old owner did (issue 36 §1): by replay, from a snapshot transfer's
state (with the marks it carries, or without: then it reads the partitions for their marks),
across a kill between a batch's write and its commit, and with T1 moving while it catches up.
The old owner is a ``TestDriver`` (the live reference), its log mirrored into the in-memory
Kafka the receiver reads (``catchup_world``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from framework.bootstrap import BuildRequest
from framework.bootstrap.build import build_state
from framework.coordination.registry import TopicEntry
from framework.input_times import ORDER_SCOPE
from framework.order import NO_FLOOR
from framework.runtime.catchup_apply import SparkBuild
from framework.snapshots.source_starts import (
    catch_up_starts,
    mark_scope,
    snapshot_marks,
    source_mark_scope,
    source_scope,
)
from framework.testing import TestDriver
from framework.time.ticks import is_tick
from rebalance import TopicHistory
from rebalance.positions import OffsetRange, Position
from statestore import ProcessorDatabase, StateBatch
from tests.clocks import ManualClock
from tests.framework.order.appending_app import INPUTS, PARTITIONS, appending_app
from tests.framework.order.appending_world import drawn, ends_of, home
from tests.framework.order.catchup_world import (
    GAINED,
    catch_up,
    finish,
    gained_state,
    owner_state,
    receiver_database,
    sent_to,
    step_until_read,
    t1_of,
    world,
)
from tests.framework.order.test_review_bulk import _FinishedRun
from tests.framework.order.test_spark_order import archive

SCOPE = "catchup-1"


class Died(BaseException):
    """The process died (what no ``except Exception`` catches)."""


def _owner_marks(driver: TestDriver) -> dict[Position, int]:
    marks = driver.database.progress(ORDER_SCOPE)
    return {position: marks[position] for position in GAINED if position in marks}


def _forced_ticks(driver: TestDriver) -> None:
    """Let ``max_input_wait`` pass on the old owner: what waits gets forced ticks (ticks of
    floor 0 to every partition first: below every mark, they move none)."""
    driver.advance_time(0)


def test_a_replay_applies_the_gained_keys_as_their_old_owner(tmp_path: Path) -> None:
    """The records arrive in bursts of one input with times that jitter: applied topic by
    topic, or as they arrived, a gained key's state differs from its old owner's; the
    catch-up's is the old owner's, and so are the marks it hands over at F."""
    kafka, driver = world()
    sent = drawn(seed=3, count=120)
    sent_to(driver, sent)
    _forced_ticks(driver)
    assert kafka.broker.partition(GAINED[0]).end > 0
    expected = owner_state(driver)
    assert len(expected) >= 2
    database = receiver_database(tmp_path / "db")
    try:
        catchup = catch_up(kafka, database, t1_of(driver))
        finish(kafka, catchup, t1_of(driver))
        catchup.close()
        assert gained_state(database) == expected
        assert database.offsets() == t1_of(driver)
        assert database.progress(ORDER_SCOPE) == _owner_marks(driver)
        assert all(mark > NO_FLOOR for mark in _owner_marks(driver).values())
    finally:
        database.close()


def test_the_arrival_order_would_differ_here() -> None:
    """(The records of the tests: their order matters for the gained keys.)"""
    sent = drawn(seed=3, count=120)
    _kafka, canonical = world()
    sent_to(canonical, sent)
    _forced_ticks(canonical)
    arrival = TestDriver(appending_app("arrival"))
    sent_to(arrival, sent)
    assert owner_state(arrival) != owner_state(canonical)


def test_a_catch_up_whose_t1_moves_applies_what_the_old_owner_did(tmp_path: Path) -> None:
    """The receiver catches up to T1 while the old owner has records read and waiting past
    it (they wait in the receiver's read-ahead too); the old owner goes on, T1 moves, then
    the release at F: the same state."""
    kafka, driver = world()
    sent = drawn(seed=5, count=140)
    sent_to(driver, sent[:70])
    database = receiver_database(tmp_path / "db")
    try:
        t1 = t1_of(driver)
        catchup = catch_up(kafka, database, t1)
        step_until_read(kafka, catchup, t1)
        assert database.progress(SCOPE) == t1
        assert kafka.broker.partition(GAINED[0]).end + kafka.broker.partition(GAINED[1]).end > sum(
            t1.values()
        )  # (records past T1 were read and wait)
        sent_to(driver, sent[70:])
        _forced_ticks(driver)
        kafka.broker.groups["appending"].update(t1_of(driver))
        catchup.refresh(force=True)
        finish(kafka, catchup, t1_of(driver))
        catchup.close()
        assert gained_state(database) == owner_state(driver)
        assert database.progress(ORDER_SCOPE) == _owner_marks(driver)
    finally:
        database.close()


@pytest.mark.parametrize("dies_at", [2, 5, 9])
def test_a_receiver_killed_between_a_batch_and_its_commit_goes_on_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dies_at: int
) -> None:
    """The receiver dies in its ``dies_at``-th commit (the batch written, not committed); its
    restart goes on from the progress and marks last committed (``<scope>-mark``)."""
    kafka, driver = world()
    sent_to(driver, drawn(seed=7, count=120))
    _forced_ticks(driver)
    t1 = t1_of(driver)
    commit, commits = StateBatch.commit, [0]

    def dying(batch: StateBatch) -> None:
        commits[0] += 1
        if commits[0] == dies_at:
            raise Died(f"commit {dies_at}")
        commit(batch)

    path = tmp_path / "db"
    database = receiver_database(path)
    catchup = catch_up(kafka, database, t1)
    monkeypatch.setattr(StateBatch, "commit", dying)
    with pytest.raises(Died):
        finish(kafka, catchup, t1)
    monkeypatch.setattr(StateBatch, "commit", commit)
    catchup.close()
    progress = database.progress(SCOPE)
    database.close()
    assert progress != t1  # (it died mid-way)
    database = receiver_database(path)
    try:
        restarted = catch_up(kafka, database, t1)
        finish(kafka, restarted, t1)
        restarted.close()
        assert gained_state(database) == owner_state(driver)
        assert database.progress(ORDER_SCOPE) == _owner_marks(driver)
    finally:
        database.close()


class _SnapshotCopy:
    """A transfer by snapshot (``BulkBuild``) as ``SnapshotTransfer`` ingests one: the gained
    keys' values of the source's snapshot, where it covers each partition (and, ``marks``,
    its marks there: ``snapshot_marks``), then the catch-up's progress and marks as its
    ``_finish`` writes them (``catch_up_starts``)."""

    polled_every = False

    def __init__(self, database: ProcessorDatabase, source: TestDriver, *, marks: bool) -> None:
        self._database = database
        self.values = owner_state(source)  # (a snapshot: taken now)
        self.starts = t1_of(source)
        self.marks = snapshot_marks(source.database.backend, self.starts) if marks else {}

    def describe(self) -> str:
        """What it is."""
        return "copied from the source's snapshot"

    def cancel(self) -> None:
        """Nothing runs."""

    def poll(self) -> int:
        """Write it all; returns how many keys."""
        batch = self._database.begin()
        for key, value in self.values.items():
            batch.store("applied").set(key, value)
        for (topic, partition), offset in self.starts.items():
            batch.set_progress(source_scope(SCOPE, 0), topic, partition, offset)
        for (topic, partition), mark in self.marks.items():
            batch.set_progress(source_mark_scope(SCOPE, 0), topic, partition, mark)
        batch.commit()
        reads = {0: (frozenset(GAINED), dict.fromkeys(GAINED))}
        firsts, marks = catch_up_starts(self._database, SCOPE, reads)
        batch = self._database.begin()
        for (topic, partition), first in firsts.items():
            batch.set_progress(SCOPE, topic, partition, first)
        for (topic, partition), mark in marks.items():
            batch.set_progress(mark_scope(SCOPE), topic, partition, mark)
        batch.set_flag(f"{SCOPE}-bootstrapped")
        batch.commit()
        return len(self.values)


@pytest.mark.parametrize("marks", [True, False], ids=["marks carried", "no marks"])
def test_a_snapshot_transfer_goes_on_as_the_old_owner(tmp_path: Path, marks: bool) -> None:
    """The source's snapshot is taken mid-way (its marks at its offsets in its ``order-mark``);
    the receiver goes on from it to F. With the marks it reads on from the snapshot's
    offsets; without (a snapshot of before they were carried) it reads the partitions from
    their start for their marks only, applying nothing the snapshot holds again."""
    kafka, driver = world()
    sent = drawn(seed=11, count=140)
    sent_to(driver, sent[:80])
    database = receiver_database(tmp_path / "db")
    try:
        copy = _SnapshotCopy(database, driver, marks=marks)
        assert copy.marks or not marks
        sent_to(driver, sent[80:])
        _forced_ticks(driver)
        catchup = catch_up(kafka, database, t1_of(driver), bootstrap=lambda _c: copy)
        catchup.step(5)  # (the bulk build is in)
        assert catchup.positions == (copy.starts if marks else dict.fromkeys(GAINED, 0))
        finish(kafka, catchup, t1_of(driver))
        catchup.close()
        assert gained_state(database) == owner_state(driver)
        assert database.progress(ORDER_SCOPE) == _owner_marks(driver)
    finally:
        database.close()


def test_the_log_holds_forced_ticks() -> None:
    """(The old owner forced ticks in these tests: the receiver reads them as ticks.)"""
    kafka, driver = world()
    sent_to(driver, drawn(seed=3, count=120))
    _forced_ticks(driver)
    ticks = [
        record
        for position in GAINED
        for record in kafka.broker.partition(position).records
        if record.key is None and is_tick(list(record.headers or ()))
    ]
    assert ticks


@pytest.mark.spark
def test_a_scales_spark_build_goes_on_as_the_old_owner(spark: SparkSession, tmp_path: Path) -> None:
    """A scale's Spark build (``bootstrap: spark``) of the gained keys from the history up to
    T1 stops at the canonical cut with the marks there; the catch-up goes on from them (not
    from the start) to F and gets the old owner's state and marks."""
    kafka, driver = world()
    sent = drawn(seed=13, count=140)
    sent_to(driver, sent[:80])  # (no forced tick yet: the archive holds what was sent)
    t1 = t1_of(driver)
    ends = ends_of(sent[:80])
    request = BuildRequest(
        processors=2,
        gained_from=(1, frozenset({0})),
        covers={1: list(GAINED)},
        ranges={position: OffsetRange(0, t1[position]) for position in GAINED},
        retained={position: OffsetRange(0, ends[position]) for position in GAINED},
        entries={topic: TopicEntry(TopicHistory(topic, (PARTITIONS,))) for topic in INPUTS},
        archive=archive([s for s in sent[:80] if home(*s[:2]) in GAINED], tmp_path / "archive"),
    )
    manifest = build_state(appending_app(), request, tmp_path / "built", spark=spark)
    target = manifest.targets[1]
    assert target.marks  # (the build's marks at its offsets)
    sent_to(driver, sent[80:])
    _forced_ticks(driver)
    database = receiver_database(tmp_path / "db")
    try:
        flag = f"{SCOPE}-bootstrapped"
        run = _FinishedRun(manifest, tmp_path / "run")
        build = SparkBuild(run, database, 1, SCOPE, flag)  # type: ignore[arg-type]
        catchup = catch_up(kafka, database, t1_of(driver), bootstrap=lambda _c: build)
        clock = kafka.clock
        assert isinstance(clock, ManualClock)
        while catchup.bootstrapping:  # (polled every half second)
            catchup.step(5)
            clock.now += 0.5
        assert catchup.positions == {p: target.offsets[p] for p in GAINED}
        finish(kafka, catchup, t1_of(driver))
        catchup.close()
        assert gained_state(database) == owner_state(driver)
        assert database.progress(ORDER_SCOPE) == _owner_marks(driver)
    finally:
        database.close()
