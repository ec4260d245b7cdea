"""Processors' progress reports on Kafka: written, read back newest first, malformed ones left
out, and a report that says nothing new recognised as such."""

from __future__ import annotations

import random

from framework.coordination.progress_reports import (
    ProcessorReport,
    progress_topic_spec,
    read_reports,
    report_key,
)
from tests.clocks import ManualClock
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
