"""A receiver owns the partitions it took over as soon as its COMPLETE is written, before its
watcher reads that far; it then notes the log's end as read (``remember_end``), so that a
control log restored from a copy older than its COMPLETE is refused at its next start instead
of making it take the partitions over again from F (found in review)."""

from __future__ import annotations

import random

from framework.coordination.control_guard import OFFSET_SCOPE
from framework.coordination.control_log import ControlLog, ControlWatcher
from framework.kafka import TopicSpec
from rebalance.control_records import instance_record
from statestore import DatabaseIdentity, ProcessorDatabase
from tests.clocks import ManualClock
from tests.sim.broker import Broker
from tests.sim.kafka import MemoryKafka

TOPIC = "app-control"


def test_remember_end_notes_records_written_but_not_yet_read() -> None:
    kafka = MemoryKafka(Broker(random.Random(1)), ManualClock())
    kafka.create_topics([TopicSpec(TOPIC, 1)])
    log = ControlLog(kafka, TOPIC)
    watcher = ControlWatcher(kafka, TOPIC)
    database = ProcessorDatabase.in_memory(DatabaseIdentity("app", 0), [])
    watcher.record_in(database)
    log.append(instance_record(0, "a"), instance_record(1, "b"))
    watcher.poll()
    assert database.progress(OFFSET_SCOPE)[(TOPIC, 0)] == 2
    log.append(instance_record(0, "c"))  # written by this processor, not read back yet
    assert watcher.position() == 2
    watcher.remember_end()
    assert database.progress(OFFSET_SCOPE)[(TOPIC, 0)] == 3
