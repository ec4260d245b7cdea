"""What ``splitstate status`` shows: processors, their partitions, state size, lag and share."""

from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from framework.app import App
from framework.controllog import ControlLog
from framework.registry import TopicRegistry
from rebalance import bucket, expected_shares

__all__ = ["AppStatus", "PartitionStatus", "ProcessorStatus", "collect_status", "render_status"]


@dataclass(frozen=True)
class PartitionStatus:
    """One input partition: its owner, committed offset (T1), end offset and lag."""

    topic: str
    partition: int
    owner: int
    committed: int | None
    end: int

    @property
    def lag(self) -> int:
        """Records not yet processed (per the consumer group's committed offset)."""
        return self.end - (self.committed or 0)


@dataclass(frozen=True)
class ProcessorStatus:
    """One processor: its partitions, expected key share, local state size and pid."""

    processor: int
    partitions: list[PartitionStatus]
    share: Fraction
    state_bytes: int | None
    pid: int | None

    @property
    def lag(self) -> int:
        """Total lag over its partitions."""
        return sum(p.lag for p in self.partitions)


@dataclass(frozen=True)
class AppStatus:
    """The whole app."""

    app_id: str
    generation: int | None
    initial_processors: int
    processors: list[ProcessorStatus]
    topic_counts: dict[str, list[int]]


def _directory_size(path: Path) -> int | None:
    if not path.is_dir():
        return None
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _pids(state_dir: Path) -> dict[int, int]:
    try:
        data = json.loads((state_dir / "supervisor.json").read_text())
    except (OSError, ValueError):
        return {}
    return {int(j): int(pid) for j, pid in data.get("processors", {}).items()}


def collect_status(app: App) -> AppStatus:
    """Read the control log, registry, consumer group offsets and local state sizes."""
    config = app.config
    client = config.kafka.client_settings()
    admin = AdminClient(client)
    control = ControlLog(client, admin, config.control_topic).read()
    b = control.app.initial_processors if control.app else config.initial_processors
    p = control.processors or config.processor_count
    entries = TopicRegistry(client, admin).read()
    consumer = Consumer({**client, "group.id": config.app_id, "enable.auto.commit": False})
    try:
        positions = [
            TopicPartition(t.topic, partition)
            for t in config.inputs
            if t.topic in entries
            for partition in range(entries[t.topic].partitions)
        ]
        partitions = []
        for tp in consumer.committed(positions, timeout=30):
            _low, high = consumer.get_watermark_offsets(
                TopicPartition(tp.topic, tp.partition), timeout=30
            )
            committed = tp.offset if tp.offset >= 0 else None
            owner = bucket(tp.partition, b, p)
            partitions.append(PartitionStatus(tp.topic, tp.partition, owner, committed, high))
    finally:
        consumer.close()
    shares = expected_shares(b, p)
    pids = _pids(config.app_state_dir)
    processors = [
        ProcessorStatus(
            j,
            [s for s in partitions if s.owner == j],
            shares[j],
            _directory_size(config.app_state_dir / f"processor-{j}"),
            pids.get(j),
        )
        for j in range(p)
    ]
    counts = {
        t.topic: list(entries[t.topic].history.counts) for t in config.inputs if t.topic in entries
    }
    generation = control.generation.generation if control.generation else None
    return AppStatus(config.app_id, generation, b, processors, counts)


def _size(value: int | None) -> str:
    if value is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.0f} {unit}"
        value //= 1024
    return f"{value} TiB"


def render_status(status: AppStatus) -> str:
    """A plain-text report."""
    lines = [
        f"app {status.app_id}: generation {status.generation}, "
        f"{len(status.processors)} processors (initial {status.initial_processors})",
    ]
    for topic, counts in status.topic_counts.items():
        lines.append(f"input {topic}: partitions {' -> '.join(map(str, counts))}")
    lines.append("")
    lines.append(f"{'processor':>9} {'pid':>7} {'share':>7} {'state':>9} {'lag':>9}  partitions")
    for processor in status.processors:
        parts = ", ".join(f"{p.topic}[{p.partition}]" for p in processor.partitions)
        lines.append(
            f"{processor.processor:>9} {processor.pid or '-':>7} "
            f"{float(processor.share):>7.1%} {_size(processor.state_bytes):>9} "
            f"{processor.lag:>9}  {parts}"
        )
    lines.append("")
    lines.append(f"{'partition':<28} {'owner':>5} {'committed':>10} {'end':>10} {'lag':>8}")
    for processor in status.processors:
        for part in sorted(processor.partitions, key=lambda s: (s.topic, s.partition)):
            committed = "-" if part.committed is None else str(part.committed)
            lines.append(
                f"{part.topic + '[' + str(part.partition) + ']':<28} {part.owner:>5} "
                f"{committed:>10} {part.end:>10} {part.lag:>8}"
            )
    uneven = len({p.share for p in status.processors}) > 1
    if uneven:
        lines.append("")
        lines.append(
            "note: shares are uneven because the processor count is not initial_processors "
            "times a power of two; split processors carry half the keys of the others."
        )
    return "\n".join(lines)
