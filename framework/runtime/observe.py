"""What a run shows of itself: its metrics and health (when on), and its progress line.

``RunObserver`` is fed by the loop's thread: ``settled`` once per committed batch (counters,
the batch duration), ``stepped`` once per loop step (the heartbeat, and about once a second a
new ``Observation`` of the run's parts for the gauges and ``/readyz``). It reads the parts it
is given and changes none of them; the end offsets behind the lag gauges are read from Kafka
every few seconds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from framework.clock import Clock
from framework.coordination.control_log import ControlWatcher
from framework.growth.lease import RegistryLease
from framework.kafka import KafkaConsumer
from framework.metrics import CatchUpView, HandoffView, Observation, ProcessorMetrics
from framework.runtime.assignment import Assignment
from framework.runtime.batches import BatchResult
from framework.runtime.catchup import CatchUp
from framework.runtime.handoffs import HandoffCoordinator
from framework.runtime.stats import RuntimeStats
from framework.snapshots.taker import SnapshotTaker
from rebalance.positions import Position
from statestore import ProcessorDatabase

__all__ = ["RunObserver", "RunParts", "after_each_step", "catch_up_progress", "progress_line"]

log = logging.getLogger(__name__)
#: how often the gauges are refreshed from the run's parts, and the end offsets (as the
#: consumer's fetches saw them: no broker call) and the state's size (its files) are read
_PUBLISH_SECONDS = 1.0
_ENDS_SECONDS = 5.0
#: a failed observation is logged once in this long at most
_WARN_SECONDS = 60.0


def progress_line(processor: int, stats: RuntimeStats, now: float, catchup: CatchUp | None) -> str:
    """The line the loop logs now and then: records, their rate, restored, outputs, dead
    letters, and the catch-up's progress."""
    elapsed = max(now - stats.started, 1e-9)
    return (
        f"processor {processor}: {stats.records} records ({stats.records / elapsed:.0f}/s), "
        f"{stats.restored} restored, {stats.outputs} outputs, {stats.dead_letters} dead "
        f"letters{catch_up_progress(catchup)}"
    )


def catch_up_progress(catchup: CatchUp | None) -> str:
    """The catch-up's progress, for the loop's periodic log line ("" when none runs)."""
    if catchup is not None and catchup.bootstrap is not None:
        return f", building gained keys in bulk: {catchup.bootstrap.describe()}"
    if catchup is not None:
        return f", catching up (lag {catchup.lag()}, {catchup.applied} applied)"
    return ""


@dataclass(frozen=True)
class RunParts:
    """The parts of a run the observer reads."""

    reading: Assignment
    handoffs: HandoffCoordinator
    watcher: ControlWatcher
    outputs: RegistryLease
    database: ProcessorDatabase
    snapshots: SnapshotTaker | None


def after_each_step(
    steps: Sequence[Callable[[], None]], observer: RunObserver | None
) -> Callable[[], None]:
    """What the loop calls after each of its steps: ``steps`` in turn, then (with metrics on)
    the observer's ``stepped``."""
    every = [*steps, *([] if observer is None else [observer.stepped])]

    def each() -> None:
        for step in every:
            step()

    return each


class RunObserver:
    """Feeds processor ``processor``'s ``metrics`` from the parts of one run."""

    def __init__(
        self,
        metrics: ProcessorMetrics,
        processor: int,
        *,
        parts: RunParts,
        consumer: KafkaConsumer,
        stats: RuntimeStats,
        stopping: Callable[[], bool],
        clock: Clock,
    ) -> None:
        self.metrics = metrics
        self.processor = processor
        self._reading = parts.reading
        self._handoffs = parts.handoffs
        self._watcher = parts.watcher
        self._outputs = parts.outputs
        self._database = parts.database
        self._consumer = consumer
        self._snapshots = snapshots = parts.snapshots
        self._stats = stats
        self._stopping = stopping
        self._clock = clock
        self._published = -_PUBLISH_SECONDS
        self._ends_read = -_ENDS_SECONDS
        self._warned = -_WARN_SECONDS
        self._sized = -_ENDS_SECONDS
        self._state_bytes: int | None = None
        self._ends: dict[Position, int] = {}
        self._replayed = stats.replayed
        self._uploaded = 0 if snapshots is None else snapshots.uploaded_bytes

    def settled(self, result: BatchResult) -> None:
        """Count a committed batch."""
        self.metrics.batch(
            result.taken,
            restored=result.restored,
            outputs=result.outputs,
            dead_letters=result.dead_letters,
            seconds=max(0.0, self._clock.monotonic() - result.started),
        )

    def stepped(self, force: bool = False) -> None:
        """A loop step ended: beat, and publish a new observation when one is due."""
        stopping = self._stopping()
        self.metrics.heartbeat.beat("stopping" if stopping else "running")
        now = self._clock.monotonic()
        if force or now - self._published >= _PUBLISH_SECONDS:
            self._published = now
            try:
                self.metrics.publish(self.observe(now, stopping))
            except Exception as error:  # metrics never end the run: the last values stay
                if now - self._warned >= _WARN_SECONDS:
                    self._warned = now
                    log.warning("processor %d: metrics not updated: %s", self.processor, error)

    def last(self) -> None:
        """Publish the run's last values as it closes (a failure is only logged: the error
        that ended the run is the one to raise)."""
        try:
            self.stepped(force=True)
        except Exception as error:
            log.warning("processor %d: last metrics not read: %s", self.processor, error)

    def observe(self, now: float, stopping: bool) -> Observation:
        """The run as it is now (read in the loop's thread, between batches)."""
        handoffs, reading = self._handoffs, self._reading
        catchup = handoffs.catchup
        self.metrics.caught_up(self._stats.replayed - self._replayed)
        self._replayed = self._stats.replayed
        if self._snapshots is not None:
            self.metrics.uploaded(self._snapshots.uploaded_bytes - self._uploaded)
            self._uploaded = self._snapshots.uploaded_bytes
        owned = set(reading.owned)
        offsets = self._database.offsets()
        phase, reason = self._phase(catchup, stopping)
        lease_fresh = self._outputs.fresh()
        if phase == "running" and not lease_fresh:
            reason = "the topic registry could not be re-read within the output lease"
        latest = None if self._snapshots is None else self._snapshots.latest
        return Observation(
            phase=phase,
            ready=phase == "running" and lease_fresh,
            reason=reason,
            committed={p: offsets[p] for p in owned if p in offsets},
            ends=self._read_ends(owned, now),
            state_bytes=self._size(now),
            catchup=_catch_up_view(catchup),
            handoffs=self._handoff_views(),
            snapshot_created=None if latest is None else latest.created,
            snapshot_uploading=self._snapshots is not None and self._snapshots.upload is not None,
            gates_held=len(reading.holds.held),
            lease_age=self._outputs.age(),
            lease_seconds=self._outputs.lease_seconds,
        )

    def _phase(self, catchup: CatchUp | None, stopping: bool) -> tuple[str, str]:
        """The processor's phase, and why it is not ready in it."""
        if stopping:
            return "stopping", "the processor is stopping"
        if catchup is not None and catchup.bootstrapping:
            return "bootstrapping", (
                f"building the keys it gains in generation {catchup.generation} in bulk"
            )
        if catchup is not None:
            lag = sum(catchup.lag().values())
            return "catching_up", (
                f"catching up for generation {catchup.generation} (lag {lag} records); ready "
                "once its handoffs are COMPLETE"
            )
        if self._reading.rebuilding():
            return "restoring", "rebuilding lost state up to the group's committed offsets"
        if not self._reading.owned:
            return "idle", "the processor reads no partitions"
        return "running", "ready"

    def _size(self, now: float) -> int | None:
        """The state's size, read every few seconds."""
        if now - self._sized >= _ENDS_SECONDS:
            self._sized = now
            self._state_bytes = self._database.size_bytes()
        return self._state_bytes

    def _read_ends(self, owned: set[Position], now: float) -> dict[Position, int]:
        """The owned partitions' end offsets as the consumer's fetches last saw them (no
        broker call: the loop never waits for these), every few seconds."""
        if now - self._ends_read >= _ENDS_SECONDS or not owned <= self._ends.keys():
            self._ends_read = now
            self._ends.update(self._consumer.fetched_ends(sorted(owned)))
        return {p: self._ends[p] for p in owned if p in self._ends}

    def _handoff_views(self) -> tuple[HandoffView, ...]:
        scale = self._watcher.state.scaling
        if scale is None:
            return ()
        involved = [*scale.outgoing(self.processor), *scale.incoming(self.processor)]
        return tuple(
            HandoffView(scale.generation, h.source, h.target, h.phase.value) for h in involved
        )


def _catch_up_view(catchup: CatchUp | None) -> CatchUpView | None:
    if catchup is None:
        return None
    if catchup.bootstrapping:
        return CatchUpView(catchup.generation, bootstrapping=True)
    s1 = sorted(catchup.s1)
    return CatchUpView(
        catchup.generation,
        t1={p: catchup.limit(p) or 0 for p in s1},
        t2={p: catchup.positions[p] for p in s1},
        lag=catchup.lag(),
    )
