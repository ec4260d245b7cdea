"""One processor's metrics: a registry of its own, counters fed per batch, gauges read at
scrape time, and its health.

The registry is the processor's (never prometheus_client's global one), so several processors
in one process (tests, the simulation) each expose only their own series. Counters are updated
once per committed batch with the batch's totals, never per record.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram

from framework.metrics.collector import ObservationCollector
from framework.metrics.heartbeat import Heartbeat
from framework.metrics.observation import Observation
from rebalance.positions import Position

__all__ = ["BATCH_BUCKETS", "ProcessorMetrics"]

#: bounds of the batch duration histogram, in seconds
BATCH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_LABELS = ["app", "processor"]


class ProcessorMetrics:
    """Processor ``processor`` of app ``app_id``: its registry, counters and health
    (``now``: the heartbeat's monotonic clock)."""

    def __init__(
        self,
        app_id: str,
        processor: int,
        stall_seconds: float = 120.0,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app_id = app_id
        self.processor = processor
        self.registry = CollectorRegistry(auto_describe=True)
        self.heartbeat = Heartbeat(stall_seconds, now)
        self._observation = Observation()
        self._labels = (app_id, str(processor))
        registry = self.registry

        def counter(name: str, text: str, extra: tuple[str, ...] = ()) -> Counter:
            return Counter(name, text, [*_LABELS, *extra], registry=registry)

        self._records = counter(
            "splitstate_records",
            "input records taken per partition (processed, skipped after crashes, or rebuilt "
            "without output after a lost state directory)",
            ("topic", "partition"),
        )
        self._restored = counter(
            "splitstate_restored_records", "records rebuilt without output (lost state)"
        ).labels(*self._labels)
        self._outputs = counter("splitstate_outputs", "output records written").labels(
            *self._labels
        )
        self._dead_letters = counter(
            "splitstate_dead_letters", "records sent to the dead-letter topic"
        ).labels(*self._labels)
        self._caught_up = counter(
            "splitstate_catchup_records",
            "records a receiver's catch-up took in order (applied, or passed over as not gained)",
        ).labels(*self._labels)
        self._uploaded = counter(
            "splitstate_snapshot_upload_bytes", "bytes of snapshots copied to the store"
        ).labels(*self._labels)
        self._batches = Histogram(
            "splitstate_batch_duration_seconds",
            "seconds from the start of processing a batch to the commit of its state",
            _LABELS,
            buckets=BATCH_BUCKETS,
            registry=registry,
        ).labels(*self._labels)
        self._per_partition: dict[Position, Counter] = {}
        registry.register(
            ObservationCollector(
                app_id,
                processor,
                self.observed,
                self.heartbeat,
                ready=lambda: self.readiness()[0],
            )
        )

    def batch(
        self,
        taken: Mapping[Position, int],
        *,
        restored: int,
        outputs: int,
        dead_letters: int,
        seconds: float,
    ) -> None:
        """Count one committed batch: records ``taken`` per partition, and its totals."""
        for position, count in taken.items():
            child = self._per_partition.get(position)
            if child is None:
                child = self._records.labels(*self._labels, position[0], str(position[1]))
                self._per_partition[position] = child
            child.inc(count)
        if restored:
            self._restored.inc(restored)
        if outputs:
            self._outputs.inc(outputs)
        if dead_letters:
            self._dead_letters.inc(dead_letters)
        self._batches.observe(seconds)

    def caught_up(self, records: int) -> None:
        """Count records a catch-up took."""
        if records > 0:
            self._caught_up.inc(records)

    def uploaded(self, size: int) -> None:
        """Count snapshot bytes copied to the store."""
        if size > 0:
            self._uploaded.inc(size)

    def publish(self, observation: Observation) -> None:
        """Make ``observation`` the one scrapes and ``/readyz`` read."""
        self._observation = observation

    def observed(self) -> Observation:
        """The newest published observation."""
        return self._observation

    def health(self) -> tuple[bool, str]:
        """``/healthz``: whether the loop is alive, with a one-line reason."""
        return self.heartbeat.alive()

    def readiness(self) -> tuple[bool, str]:
        """``/readyz``: alive, owns its partitions, and neither restoring nor catching up."""
        alive, why = self.heartbeat.alive()
        if not alive:
            return False, why
        seen = self._observation
        if self.heartbeat.activity != "running":
            return False, f"the processor is {self.heartbeat.activity}"
        return (True, "ready") if seen.ready else (False, seen.reason)
