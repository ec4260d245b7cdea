"""Each processor's progress report on Kafka, so ``status`` on any host can read it.

A processor runs on its own machine, with its own state directory; what ``status`` shows of
it that only the processor knows -- a receiver's catch-up position (T2), its Spark
bootstrap's stages, its snapshot transfer, its state size, the records it skipped -- is
written as one JSON record per processor to the app's progress topic
(``<app_id>-splitstate-progress``). The topic is keyed by processor and compacted, and also
deletes records after a week: only the newest report of each processor matters. A running
processor writes one at least every ``HEARTBEAT_SECONDS`` (every 2 s during a scale), and each
report says when the next is due (``every``), so a processor that was killed and could not
say it stopped is known by its silence (``overdue``); where the reader shares the
processor's process ids (``pid_space``), by its pid being gone.

Nothing reads a report to decide anything: ownership, handoffs and offsets stay in the control
log and the consumer group. A lost or stale report makes ``status`` show less, never changes
state. So a report that cannot be read (not JSON, or not of the schema below: anyone who
can write to the topic may have written it) is left out by every reader, with a warning, and
``status`` shows the other processors' reports: refusing it would take ``status`` away and
protect nothing.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError

from framework.kafka import Kafka, KafkaIOError, TopicSpec
from rebalance.record_checks import (
    Index,
    MalformedRecordError,
    Offset,
    Seconds,
    Text,
    describe,
    json_object,
)

__all__ = [
    "GRACE_SECONDS",
    "HEARTBEAT_SECONDS",
    "PROGRESS_TOPIC_CONFIG",
    "ProcessorReport",
    "overdue",
    "pid_space",
    "progress_topic_spec",
    "read_reports",
    "report_key",
]

log = logging.getLogger(__name__)

#: A running processor writes a report at least this often (more often while it catches up).
HEARTBEAT_SECONDS = 30.0

#: how late a report may be (a slow batch, clocks of two hosts) before its processor is
#: taken for silent
GRACE_SECONDS = 10.0

#: Compacted (a report replaces the processor's previous one) and deleted after a week.
PROGRESS_TOPIC_CONFIG = {
    "cleanup.policy": "compact,delete",
    "retention.ms": str(7 * 24 * 3600 * 1000),
    "segment.ms": str(3600 * 1000),
    "min.insync.replicas": "1",
}

Position = tuple[str, int]


def _positions(pairs: Mapping[Position, int]) -> list[list[Any]]:
    return [[topic, partition, value] for (topic, partition), value in sorted(pairs.items())]


def _pairs(rows: list[tuple[str, int, int]] | None) -> dict[Position, int]:
    return {(t, p): v for t, p, v in rows or []}


#: ``[topic, partition, number]`` rows
_Rows = list[tuple[Text, Index, Offset]] | None
_Number = Annotated[int, Strict()] | Seconds


class _Bootstrap(BaseModel):
    """A Spark bootstrap's progress as reported (``framework.bootstrap.progress``)."""

    generation: Index
    phase: Text = "?"
    tasks_done: _Number = 0
    tasks_total: _Number = 0
    records_read: _Number = 0
    records_applied: _Number = 0
    started: _Number = 0
    updated: _Number = 0


class _Transfer(BaseModel):
    """A snapshot transfer's progress as reported (``TransferProgress``)."""

    generation: Index
    processor: Index
    phase: Text = "waiting"
    bytes_copied: Offset = 0
    bytes_total: Offset = 0
    keys_kept: Offset = 0
    waiting_for: list[Index] = Field(default_factory=list)
    started: Seconds = 0.0
    updated: Seconds = 0.0


class _Report(BaseModel):
    """The schema of a report (``ProcessorReport.encode``); later fields are left out."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    processor: Index
    host: Text
    pid: Offset
    updated: Seconds
    state_bytes: Offset | None = None
    catch_up_generation: Index | None = None
    catch_up: _Rows = None
    bootstrap: _Bootstrap | None = None
    transfer: _Transfer | None = None
    unfenced: _Rows = None
    skipped: list[tuple[Text, Index, Offset, Offset, Seconds]] | None = None
    stopped: Annotated[bool, Strict()] = False
    every: Annotated[Seconds, Field(gt=0)] = HEARTBEAT_SECONDS  # older reports have none
    pid_space: Text | None = None
    unplaced: _Rows = None


@dataclass(frozen=True)
class ProcessorReport:
    """What processor ``processor`` last said of itself.

    ``host``/``pid``: where it runs; ``updated``: wall-clock seconds of the report;
    ``catch_up_generation``/``catch_up``: the newest scale it gains keys in and its T2 per
    input partition there (its final F once the handoff completed);
    ``bootstrap`` and ``transfer``: its Spark bootstrap's and its snapshot transfer's own
    progress reports (with their ``generation``); ``unfenced``: records it processed without
    a ``splitstate.count`` header; ``skipped``: the newest records it skipped after crashes,
    as ``(topic, partition, offset, crashes, at)``; ``stopped``: its run ended (the report
    its run wrote last); ``every``: the most seconds until its next report; ``pid_space``:
    the machine boot and process-id namespace ``pid`` belongs to (``pid_space()``);
    ``unplaced``: records without the header it dead-lettered, as no partition count places
    their keys where they are.
    """

    processor: int
    host: str
    pid: int
    updated: float
    state_bytes: int | None = None
    catch_up_generation: int | None = None
    catch_up: dict[Position, int] = field(default_factory=dict)
    bootstrap: dict[str, Any] | None = None
    transfer: dict[str, Any] | None = None
    unfenced: dict[Position, int] = field(default_factory=dict)
    skipped: list[tuple[str, int, int, int, float]] = field(default_factory=list)
    stopped: bool = False
    every: float = HEARTBEAT_SECONDS
    pid_space: str | None = None
    unplaced: dict[Position, int] = field(default_factory=dict)

    def encode(self) -> bytes:
        """The report as JSON."""
        return orjson.dumps(
            {
                "processor": self.processor,
                "host": self.host,
                "pid": self.pid,
                "updated": self.updated,
                "state_bytes": self.state_bytes,
                "catch_up_generation": self.catch_up_generation,
                "catch_up": _positions(self.catch_up),
                "bootstrap": self.bootstrap,
                "transfer": self.transfer,
                "unfenced": _positions(self.unfenced),
                "skipped": [list(s) for s in self.skipped],
                "stopped": self.stopped,
                "every": self.every,
                "pid_space": self.pid_space,
                "unplaced": _positions(self.unplaced),
            }
        )

    @classmethod
    def decode(cls, value: bytes) -> ProcessorReport:
        """A report from its JSON (``MalformedRecordError`` when it does not fit)."""
        data = json_object(value)
        try:
            report = _Report.model_validate(data)
        except ValidationError as error:
            raise MalformedRecordError(describe(error)) from None
        return cls(
            report.processor,
            report.host,
            report.pid,
            report.updated,
            report.state_bytes,
            report.catch_up_generation,
            _pairs(report.catch_up),
            data.get("bootstrap"),  # as written: checked to fit ``_Bootstrap``
            data.get("transfer"),  # (and ``_Transfer``); the readers take what they know
            _pairs(report.unfenced),
            list(report.skipped or []),
            report.stopped,
            report.every,
            report.pid_space,
            _pairs(report.unplaced),
        )

    def same_news(self, other: ProcessorReport | None) -> bool:
        """Whether ``other`` says the same but for the time and the state size."""
        if other is None:
            return False
        mine, theirs = dict(self.__dict__), dict(other.__dict__)
        for name in ("updated", "state_bytes"):
            mine.pop(name)
            theirs.pop(name)
        return mine == theirs


def overdue(report: ProcessorReport, now: float) -> bool:
    """Whether ``report`` (of a running processor) is older, at wall time ``now``, than its
    next report was due, by more than ``GRACE_SECONDS``: its processor is silent."""
    return now - report.updated > report.every + GRACE_SECONDS


def pid_space() -> str | None:
    """Which process ids this process sees: its machine's boot and its PID namespace (two
    pods of one node differ, though their host names may not). ``None`` where unknown."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    return f"{boot}/{namespace}"


def progress_topic_spec(topic: str) -> TopicSpec:
    """The progress topic (one partition, compacted, a week of retention)."""
    return TopicSpec(topic, 1, config=PROGRESS_TOPIC_CONFIG)


def report_key(processor: int) -> bytes:
    """The key of processor ``processor``'s reports (compaction keeps its newest)."""
    return f"processor/{processor}".encode()


def read_reports(kafka: Kafka, topic: str) -> dict[int, ProcessorReport]:
    """Each processor's newest report (none when the topic does not exist or is unreadable:
    reports only add to what ``status`` shows)."""
    try:
        records = kafka.read_log(topic)
    except KafkaIOError as error:
        log.warning("could not read the progress reports in %r: %s", topic, error)
        return {}
    reports: dict[int, ProcessorReport] = {}
    for offset, key, value in records:
        if key is None or not key.startswith(b"processor/"):
            continue
        if value is None:  # a tombstone: the processor's reports are gone
            number = key.removeprefix(b"processor/")
            if number.isdigit():
                reports.pop(int(number), None)
            continue
        try:
            report = ProcessorReport.decode(value)
        except MalformedRecordError as error:
            log.warning(
                "the progress report at offset %d of %r cannot be read and is left out: %s",
                offset,
                topic,
                error,
            )
            continue
        reports[report.processor] = report
    return reports
