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
state.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from framework.kafka import Kafka, KafkaIOError, TopicSpec

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


def _pairs(rows: Any) -> dict[Position, int]:
    return {(str(t), int(p)): int(v) for t, p, v in rows or []}


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
        """A report from its JSON (``ValueError``/``KeyError``/``TypeError`` when malformed)."""
        data = orjson.loads(value)
        for name in ("bootstrap", "transfer"):
            if data.get(name) is not None and not isinstance(data[name], dict):
                raise TypeError(f"{name} is not an object")
        return cls(
            int(data["processor"]),
            str(data["host"]),
            int(data["pid"]),
            float(data["updated"]),
            None if data.get("state_bytes") is None else int(data["state_bytes"]),
            None if data.get("catch_up_generation") is None else int(data["catch_up_generation"]),
            _pairs(data.get("catch_up")),
            data.get("bootstrap"),
            data.get("transfer"),
            _pairs(data.get("unfenced")),
            [
                (str(t), int(p), int(o), int(c), float(a))
                for t, p, o, c, a in data.get("skipped") or []
            ],
            bool(data.get("stopped", False)),
            float(data.get("every", HEARTBEAT_SECONDS)),  # older reports have none
            None if data.get("pid_space") is None else str(data["pid_space"]),
            _pairs(data.get("unplaced")),
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
    for _offset, key, value in records:
        if key is None or not key.startswith(b"processor/"):
            continue
        if value is None:  # a tombstone: the processor's reports are gone
            number = key.removeprefix(b"processor/")
            if number.isdigit():
                reports.pop(int(number), None)
            continue
        try:
            report = ProcessorReport.decode(value)
        except (ValueError, KeyError, TypeError) as error:
            log.warning("a malformed progress report in %r (%s) is left out", topic, error)
            continue
        reports[report.processor] = report
    return reports
