"""What ``splitstate status`` shows: processors, their partitions, state size, lag and share."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from fractions import Fraction

from framework.app import App
from framework.coordination.control_log import ControlLog
from framework.coordination.progress_reports import read_reports
from framework.coordination.registry import TopicRegistry
from framework.growth.gates import blocked_partitions
from framework.kafka import Clients, Kafka
from framework.ops.processor_facts import BootstrapStatus, ProcessorFacts, Silence
from framework.ops.snapshot_status import SnapshotReport, collect_snapshots
from framework.ops.stops import StoppedReceiver, stopped_receivers
from framework.ops.topic_status import TopicStatus, topic_status
from framework.runtime.crashes import SkippedRecord
from framework.snapshots.transfer_progress import TransferProgress
from rebalance import bucket, expected_shares

__all__ = [
    "AppStatus",
    "BootstrapStatus",
    "HandoffStatus",
    "PartitionStatus",
    "ProcessorStatus",
    "TopicStatus",
    "collect_status",
]

_BAR = 20
#: how many of the control log's ignored records status lists
_LAST_IGNORED = 3


@dataclass(frozen=True)
class PartitionStatus:
    """One input partition: its owner, committed offset (T1), end offset, lag and the earliest
    offset Kafka still holds (``start``: above 0 once retention deleted records)."""

    topic: str
    partition: int
    owner: int
    committed: int | None
    end: int
    start: int = 0

    @property
    def lag(self) -> int:
        """Records not yet processed (per the consumer group's committed offset)."""
        return self.end - (self.committed or 0)


@dataclass(frozen=True)
class ProcessorStatus:
    """One processor: its partitions, expected key share, state size, pid and host (the
    size, pid and host as seen on this machine or in its newest progress report), and why
    it is not shown as running when it reported (``silence``)."""

    processor: int
    partitions: list[PartitionStatus]
    share: Fraction
    state_bytes: int | None
    pid: int | None
    host: str | None = None
    silence: Silence | None = None

    @property
    def lag(self) -> int:
        """Total lag over its partitions."""
        return sum(p.lag for p in self.partitions)


@dataclass(frozen=True)
class HandoffStatus:
    """One (source -> target) handoff of the scale in progress, per moving partition."""

    source: int
    target: int
    phase: str
    partitions: list[tuple[str, int, int | None, int | None, int | None]]  # topic, p, T1, T2, F


@dataclass(frozen=True)
class AppStatus:
    """The whole app."""

    app_id: str
    generation: int | None
    initial_processors: int
    processors: list[ProcessorStatus]
    topic_counts: dict[str, list[int]]
    scaling_to: int | None = None
    handoffs: list[HandoffStatus] = field(default_factory=list)
    #: joiners' bulk builds: Spark jobs and snapshot transfers running on this machine
    bootstraps: list[BootstrapStatus | TransferProgress] = field(default_factory=list)
    topics: list[TopicStatus] = field(default_factory=list)
    #: receivers of the scale in progress that stopped on their own
    stopped: list[StoppedReceiver] = field(default_factory=list)
    #: the last scale, when it was aborted: (generation, old, new, reason)
    aborted: tuple[int, int, int, str] | None = None
    #: records processed without a ``splitstate.count`` header, per input partition (as
    #: counted in the processors' state on this machine)
    unfenced: dict[tuple[str, int], int] = field(default_factory=dict)
    skipped: dict[int, list[SkippedRecord]] = field(default_factory=dict)
    #: each processor's newest snapshot (``None`` with snapshots off)
    snapshots: SnapshotReport | None = None
    #: how joiners get their state (``bootstrap`` in the config)
    bootstrap: str = "snapshot"
    #: the outputs' guarantee in force (``processing_guarantee`` in the config)
    guarantee: str = "exactly-once"
    #: control-log records ignored since the app began (refused as they were written): how
    #: many, and the last few reasons
    ignored: int = 0
    last_ignored: tuple[str, ...] = ()
    #: records without a ``splitstate.count`` header dead-lettered because no partition count
    #: places their key where they are, per input partition (counted as ``unfenced``)
    unplaced: dict[tuple[str, int], int] = field(default_factory=dict)


def collect_status(app: App, kafka: Kafka | None = None) -> AppStatus:
    """Read the control log, registry, consumer group offsets and local state sizes.

    ``kafka``: the port to the app's cluster (by default the clients of the app's config,
    closed before it returns).
    """
    if kafka is None:
        clients = Clients.of(app.config)
        try:
            return collect_status(app, clients)
        finally:
            clients.close()
    config = app.config
    control = ControlLog(kafka, config.control_topic).read()
    b = control.app.initial_processors if control.app else config.initial_processors
    p = control.processors or config.processor_count
    entries = TopicRegistry(kafka).read()
    positions = [  # every partition ever created: deleted ones are still read (drained)
        (t.topic, partition)
        for t in config.inputs
        if t.topic in entries
        for partition in range(entries[t.topic].history.created)
    ]
    with kafka.consumer(config.app_id) as consumer:
        # the group's committed offset (T1) of each input partition that has one, once
        committed = consumer.committed(positions)
        retained = consumer.watermarks(positions)
    partitions = [
        PartitionStatus(
            topic,
            partition,
            bucket(partition, b, p),
            committed.get((topic, partition)),
            retained[(topic, partition)].end,
            retained[(topic, partition)].start,
        )
        for topic, partition in positions
    ]
    shares = expected_shares(b, p)
    facts = ProcessorFacts(app, read_reports(kafka, config.progress_topic), time.time())
    processors = [
        ProcessorStatus(
            j,
            [s for s in partitions if s.owner == j],
            shares[j],
            facts.state_bytes(j),
            facts.pid(j),
            facts.host(j),
            facts.silence(j),
        )
        for j in range(p)
    ]
    counts = {
        t.topic: list(entries[t.topic].history.counts) for t in config.inputs if t.topic in entries
    }
    generation = control.generation.generation if control.generation else None
    scale = control.scaling
    handoffs = []
    if scale is not None:
        for handoff in scale.handoffs.values():
            t2 = facts.catch_up(handoff.target, scale.generation)
            handoffs.append(
                HandoffStatus(
                    handoff.source,
                    handoff.target,
                    handoff.phase.value,
                    [
                        (t, p, committed.get((t, p)), t2.get((t, p)), handoff.released.get((t, p)))
                        for t, p in handoff.partitions
                    ],
                )
            )
    topics = []
    for t in config.inputs:
        entry = entries.get(t.topic)
        if entry is None:
            continue
        candidates = [
            (t.topic, c) for c in range(entry.history.initial_partitions, entry.partitions)
        ]
        blocked = blocked_partitions({t.topic: entry}, candidates, committed, committed.get)
        topics.append(
            topic_status(entry, committed, {p: reason for (_t, p), reason in blocked.items()})
        )
    bootstraps: list[BootstrapStatus | TransferProgress] = []
    if scale is not None:
        for target in sorted({h.target for h in scale.handoffs.values()}):
            bootstrap = facts.bootstrap(target, scale.generation)
            if bootstrap is not None:
                bootstraps.append(bootstrap)
            transfer = facts.transfer(target, scale.generation)
            if transfer is not None:
                bootstraps.append(transfer)
    last = control.scale
    aborted = (
        None
        if last is None or last.aborted is None
        else (last.generation, last.old_processors, last.new_processors, last.aborted)
    )
    skipped = {j: facts.skipped(j) for j in range(p)}
    return AppStatus(
        config.app_id,
        generation,
        b,
        processors,
        counts,
        scale.new_processors if scale else None,
        handoffs,
        bootstraps,
        topics,
        stopped_receivers(scale, control.instances),
        aborted,
        facts.unfenced(list(range(p))),
        {j: records for j, records in skipped.items() if records},
        collect_snapshots(
            config,
            sorted(
                set(range(p)) | ({h.target for h in scale.handoffs.values()} if scale else set())
            ),
            {pos: (r.start, r.end) for pos, r in retained.items()},
            time.time(),
        ),
        config.bootstrap,
        config.processing_guarantee,
        len(control.ignored),
        control.ignored[-_LAST_IGNORED:],
        facts.unplaced(list(range(p))),
    )
