"""Processors' progress reports on Kafka: written, read back newest first, malformed ones left
out (a report decides nothing, so every reader leaves out one it cannot read, and ``status``
shows the others), and a report that says nothing new recognised as such."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from framework.coordination.progress_reports import (
    ProcessorReport,
    progress_topic_spec,
    read_reports,
    report_key,
)
from framework.ops.status import collect_status
from tests.clocks import ManualClock
from tests.framework.test_unreadable_control_records import append, started
from tests.sim.broker import Broker
from tests.sim.kafka import MemoryKafka

TOPIC = "app-splitstate-progress"


def report(processor: int, t2: int, updated: float = 1.0) -> ProcessorReport:
    return ProcessorReport(
        processor,
        "host-a",
        4242,
        updated,
        state_bytes=1000,
        catch_up_generation=3,
        catch_up={("words", 1): t2, ("words", 3): 7},
        bootstrap={"phase": "fold", "tasks_done": 2, "generation": 3},
        transfer=None,
        unfenced={("words", 0): 5},
        skipped=[("words", 1, 17, 3, 99.5)],
    )


def write_report(kafka: MemoryKafka, topic: str, report: ProcessorReport) -> None:
    """Append ``report`` as a processor's reporter does."""
    kafka.append(topic, [(report_key(report.processor), report.encode())])


def test_a_report_reads_back_as_written() -> None:
    original = report(1, 120)
    assert ProcessorReport.decode(original.encode()) == original


def test_the_newest_report_of_each_processor_is_read() -> None:
    kafka = MemoryKafka(Broker(random.Random(0)), ManualClock())
    assert read_reports(kafka, TOPIC) == {}  # no topic yet: nothing to show
    kafka.create_topics([progress_topic_spec(TOPIC)])
    write_report(kafka, TOPIC, report(1, 100))
    write_report(kafka, TOPIC, report(0, 5))
    kafka.append(TOPIC, [(b"processor/1", b"{not json")])
    write_report(kafka, TOPIC, report(1, 250))
    kafka.append(TOPIC, [(b"processor/0", b'{"processor": 0}')])  # fields missing
    found = read_reports(kafka, TOPIC)
    assert sorted(found) == [0, 1]
    assert found[1].catch_up[("words", 1)] == 250
    assert found[0].catch_up[("words", 1)] == 5


def test_only_time_and_size_are_no_news() -> None:
    first = report(1, 100, updated=1.0)
    later = ProcessorReport(**{**first.__dict__, "updated": 9.0, "state_bytes": 5})
    assert later.same_news(first)
    assert not report(1, 101).same_news(first)
    assert not first.same_news(None)


#: progress reports that cannot be read
REPORTS = {
    "a list": b"[]",
    "a string": b'"x"',
    "not JSON": b"not json",
    "a missing field": b'{"processor": 7, "host": "h", "pid": 1}',
    "a string for a number": b'{"processor": 7, "host": "h", "pid": "1", "updated": 1}',
    "a number for a host": b'{"processor": 7, "host": 5, "pid": 1, "updated": 1}',
    "a negative processor": b'{"processor": -7, "host": "h", "pid": 1, "updated": 1}',
    "bad rows": b'{"processor": 7, "host": "h", "pid": 1, "updated": 1, "catch_up": [["t"]]}',
    "a bootstrap of text": b'{"processor": 7, "host": "h", "pid": 1, "updated": 1, '
    b'"bootstrap": {"generation": 1, "tasks_done": "many"}}',
    "a transfer of text": b'{"processor": 7, "host": "h", "pid": 1, "updated": 1, '
    b'"transfer": {"generation": 1, "processor": 7, "keys_kept": "x"}}',
}


@pytest.mark.parametrize("value", list(REPORTS.values()), ids=list(REPORTS))
def test_a_progress_report_that_cannot_be_read_is_left_out(tmp_path: Path, value: bytes) -> None:
    kafka, app = started(tmp_path)
    topic = app.config.progress_topic
    append(kafka, topic, report_key(7), value)
    append(kafka, topic, b"processor/8", value)
    with pytest.raises(ValueError):
        ProcessorReport.decode(value)
    assert sorted(read_reports(kafka, topic)) == [0]
    assert collect_status(app, kafka=kafka).generation == 0
