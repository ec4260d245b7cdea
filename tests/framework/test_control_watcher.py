"""The ``ControlWatcher``: notes what it read in the processor's database, and tells every
listener of each change.

A receiver owns the partitions it took over as soon as its COMPLETE is written, before its
watcher reads that far; it then notes the offset after its COMPLETE as read
(``remember_written``, with what the append returned), so that a control log restored from a
copy older than its COMPLETE is refused at its next start instead of making it take the
partitions over again from F (found in review)."""

from __future__ import annotations

import logging
import random

import pytest

from framework.coordination.control_guard import OFFSET_SCOPE
from framework.coordination.control_log import ControlLog, ControlWatcher
from framework.kafka import TopicSpec
from rebalance.control import ControlState
from rebalance.control_records import abort_record, instance_record
from statestore import DatabaseIdentity, ProcessorDatabase
from tests.clocks import ManualClock
from tests.sim.broker import Broker
from tests.sim.kafka import MemoryKafka

TOPIC = "app-control"


def _noting_watcher() -> tuple[ControlLog, ControlWatcher, ProcessorDatabase]:
    """A control log, and a watcher of it that notes what it read in a database."""
    kafka = MemoryKafka(Broker(random.Random(1)), ManualClock())
    kafka.create_topics([TopicSpec(TOPIC, 1)])
    watcher = ControlWatcher(kafka, TOPIC)
    database = ProcessorDatabase.in_memory(DatabaseIdentity("app", 0), [])
    watcher.record_in(database)
    return ControlLog(kafka, TOPIC), watcher, database


def test_remember_written_notes_records_written_but_not_yet_read() -> None:
    log, watcher, database = _noting_watcher()
    assert log.append(instance_record(0, "a"), instance_record(1, "b")) == 2
    watcher.poll()
    assert database.progress(OFFSET_SCOPE)[(TOPIC, 0)] == 2
    end = log.append(instance_record(0, "c"))  # written by this processor, not read back yet
    assert end == 3 and watcher.position() == 2
    watcher.remember_written(end)
    assert database.progress(OFFSET_SCOPE)[(TOPIC, 0)] == 3


def test_a_listener_that_raises_does_not_stop_the_watcher_or_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kafka = MemoryKafka(Broker(random.Random(1)), ManualClock())
    kafka.create_topics([TopicSpec(TOPIC, 1)])
    log = ControlLog(kafka, TOPIC)
    watcher = ControlWatcher(kafka, TOPIC)
    seen: list[ControlState] = []

    def broken(state: ControlState) -> None:
        if state != ControlState():  # fine when registered, fails on a change
            raise RuntimeError("listener bug")

    watcher.on_change(broken)
    watcher.on_change(seen.append)
    log.append(instance_record(0, "a"))
    with caplog.at_level(logging.WARNING, logger="framework.coordination.control_log"):
        assert watcher.poll() is True
    assert seen == [ControlState(), watcher.state] and watcher.state != ControlState()
    [warning] = caplog.records
    assert warning.levelno == logging.WARNING and "broken" in warning.getMessage()
    assert warning.exc_info is not None and "listener bug" in str(warning.exc_info[1])
    log.append(instance_record(1, "b"))
    watcher.catch_up(watcher.end_offset())  # catch_up goes on too
    assert len(seen) == 3 and seen[-1] == watcher.state


def test_an_ignored_record_is_logged_once_when_read_live_not_on_every_replay(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A refused request stays in the log: every replay (the supervisor's every 2 s, every
    `status`, a processor's start) meets it again. It is said once, by a watcher that reads
    it as it arrives; replays keep it in ``ControlState.ignored`` only (found by a new user:
    the warning repeated every 2 s and buried `status --watch`)."""
    kafka = MemoryKafka(Broker(random.Random(1)), ManualClock())
    kafka.create_topics([TopicSpec(TOPIC, 1)])
    log = ControlLog(kafka, TOPIC)
    following = ControlWatcher(kafka, TOPIC)
    following.catch_up(following.end_offset())
    log.append(abort_record(3, "first"))
    with caplog.at_level(logging.DEBUG, logger="framework.coordination.control_log"):
        following.poll()
        said = [r for r in caplog.records if r.levelno >= logging.INFO]
        assert len(said) == 1 and "abort of generation 3" in said[0].getMessage()
        caplog.clear()
        for _ in range(3):  # the supervisor, status, a scale request: replays
            assert log.read().ignored == ("an abort of generation 3, which is not in progress",)
        starting = ControlWatcher(kafka, TOPIC)  # a processor starting: its first catch-up
        starting.catch_up(starting.end_offset())
        assert len(starting.state.ignored) == 1
        assert [r for r in caplog.records if r.levelno >= logging.INFO] == []
        log.append(abort_record(4, "second"))  # new: each follower says it once
        starting.poll()
        said = [r for r in caplog.records if r.levelno >= logging.INFO]
        assert len(said) == 1 and "abort of generation 4" in said[0].getMessage()


def test_remember_written_asks_for_the_end_when_the_append_knew_no_offset() -> None:
    log, watcher, database = _noting_watcher()
    log.append(instance_record(0, "a"), instance_record(1, "b"))
    watcher.remember_written(0)  # no offset in the delivery reports: the log's end is read
    assert database.progress(OFFSET_SCOPE)[(TOPIC, 0)] == 2
