"""``FirstReads``: the loop's lines marking when a receiver began reading the partitions it
took over and when each one's first records came back (``bench/scale.py`` splits the handoff
pause with them): one line per partition and takeover, none for partitions it already read."""

from __future__ import annotations

import logging

import pytest

from framework.runtime.first_reads import FirstReads
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
