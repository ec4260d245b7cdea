"""``FirstReads``: the loop's lines marking when a receiver began reading the partitions it
took over and when each one's first records came back (``bench/scale.py`` splits the handoff
pause with them): one line per partition and takeover, none for partitions it already read."""

from __future__ import annotations

import logging

import pytest

from framework.runtime.first_reads import TAKEOVER_WAIT_SECONDS, FirstReads
from tests.clocks import ManualClock
from tests.sim.broker import StoredRecord
from tests.sim.producer import SimMessage

TOPIC = "words"


def message(partition: int, offset: int) -> SimMessage:
    return SimMessage(StoredRecord(TOPIC, partition, offset, b"k", b"v", (), 0, "test"))


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "framework.runtime.loop"]


def test_each_taken_over_partition_logs_its_first_records_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock(10.0)
    reads = FirstReads(2, clock)
    with caplog.at_level(logging.INFO, logger="framework.runtime.loop"):
        reads.began([(TOPIC, 3), (TOPIC, 7)])
        clock.now = 10.25
        reads.read([message(0, 5), message(3, 100), message(3, 101)])  # 0: its own already
        clock.now = 10.5
        reads.read([message(3, 102), message(7, 40)])
        reads.read([message(7, 41)])
    assert lines(caplog) == [
        "processor 2: reads [('words', 3), ('words', 7)] it took over",
        "processor 2: first records of [('words', 3)] it took over read 250 ms after it began "
        "reading it",
        "processor 2: first records of [('words', 7)] it took over read 500 ms after it began "
        "reading it",
    ]
    assert reads.waiting == {}


def test_a_partition_released_again_before_its_first_records_is_forgotten(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reads = FirstReads(1, ManualClock())
    reads.began([(TOPIC, 3)])
    reads.began([(TOPIC, 3)])  # read already: no second line, the first moment stays
    reads.forget([(TOPIC, 3)])
    with caplog.at_level(logging.INFO, logger="framework.runtime.loop"):
        reads.read([message(3, 1)])
    assert lines(caplog) == [] and reads.waiting == {}


def test_batches_wait_briefly_until_the_partitions_taken_over_had_records() -> None:
    clock = ManualClock(10.0)
    reads = FirstReads(1, clock)
    assert reads.wait(0.1) == 0.1  # nothing taken over
    reads.began([(TOPIC, 3), (TOPIC, 7)])
    assert reads.wait(0.1) == TAKEOVER_WAIT_SECONDS
    assert reads.wait(0.0) == 0.0  # never longer than asked
    reads.read([message(0, 5)])  # its own partitions' records: still briefly
    assert reads.wait(0.1) == TAKEOVER_WAIT_SECONDS
    reads.read([message(3, 100)])
    assert reads.wait(0.1) == TAKEOVER_WAIT_SECONDS  # 7 had none yet
    reads.read([message(7, 40)])
    assert reads.wait(0.1) == 0.1


def test_briefly_for_a_second_at_most_and_an_idle_partition_is_forgotten() -> None:
    clock = ManualClock(10.0)
    reads = FirstReads(1, clock)
    reads.began([(TOPIC, 3)])
    clock.now = 10.9
    assert reads.wait(0.1) == TAKEOVER_WAIT_SECONDS
    clock.now = 11.1  # partition 3 stays idle
    assert reads.wait(0.1) == 0.1 and reads.waiting
    reads.began([(TOPIC, 7)])  # a later takeover: briefly again
    assert reads.wait(0.1) == TAKEOVER_WAIT_SECONDS
    clock.now = 40.5
    assert reads.wait(0.1) == 0.1
    assert list(reads.waiting) == [(TOPIC, 7)]  # 3, idle for over 30 s, is no longer looked for
