"""Gauges read at scrape time from the newest ``Observation`` (a custom collector).

Every series carries the labels ``app`` and ``processor``; per-partition series add ``topic``
and ``partition``, handoff series ``generation``, ``source`` and ``target``. Phases are
state sets: one series per phase, 1 for the phase in force and 0 for the others.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from framework.metrics.heartbeat import Heartbeat
from framework.metrics.observation import PROCESSOR_PHASES, Observation
from rebalance import HandoffPhase
from rebalance.positions import Position

__all__ = ["ObservationCollector"]

_PARTITION = ["topic", "partition"]
_HANDOFF = ["generation", "source", "target", "role"]


class ObservationCollector(Collector):
    """Yields the gauges of ``observed()`` (the newest observation) and of ``heartbeat``;
    ``wall`` is the wall clock (snapshot ages); ``ready``: what ``/readyz`` answers (so
    ``splitstate_ready`` agrees with it, also when the loop is stuck)."""

    def __init__(
        self,
        app_id: str,
        processor: int,
        observed: Callable[[], Observation],
        heartbeat: Heartbeat,
        wall: Callable[[], float] = time.time,
        *,
        ready: Callable[[], bool] | None = None,
    ) -> None:
        self._names = ["app", "processor"]
        self._values = [app_id, str(processor)]
        self._processor = processor
        self._observed = observed
        self._heartbeat = heartbeat
        self._wall = wall
        #: what /readyz answers (default: the observation's readiness)
        self._ready = ready

    def _gauge(self, name: str, text: str, labels: list[str] | None = None) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, text, labels=[*self._names, *(labels or [])])

    def _per_partition(
        self, name: str, text: str, values: Mapping[Position, int]
    ) -> GaugeMetricFamily:
        family = self._gauge(name, text, _PARTITION)
        for (topic, partition), value in sorted(values.items()):
            family.add_metric([*self._values, topic, str(partition)], value)
        return family

    def _one(self, name: str, text: str, value: float) -> GaugeMetricFamily:
        family = self._gauge(name, text)
        family.add_metric(self._values, value)
        return family

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """The gauges as of the newest observation."""
        seen = self._observed()
        yield from self._run(seen)
        yield from self._partitions(seen)
        yield from self._scaling(seen)
        yield from self._snapshots_and_growth(seen)

    def _run(self, seen: Observation) -> Iterator[GaugeMetricFamily]:
        phase = self._gauge(
            "splitstate_processor_phase", "the processor's phase (1: in force)", ["phase"]
        )
        for name in PROCESSOR_PHASES:
            phase.add_metric([*self._values, name], 1.0 if seen.phase == name else 0.0)
        yield phase
        yield self._one(
            "splitstate_ready",
            "1 when /readyz answers 200 (owns its partitions, not restoring or catching up)",
            1.0 if (seen.ready if self._ready is None else self._ready()) else 0.0,
        )
        yield self._one(
            "splitstate_loop_last_step_age_seconds",
            "seconds since the loop's last step (/healthz fails past metrics.stall_seconds)",
            self._heartbeat.age(),
        )
        if seen.state_bytes is not None:
            yield self._one(
                "splitstate_state_size_bytes",
                "bytes of the processor's RocksDB files",
                seen.state_bytes,
            )

    def _partitions(self, seen: Observation) -> Iterator[GaugeMetricFamily]:
        yield self._per_partition(
            "splitstate_committed_offset",
            "next offset of the committed state per owned partition (the group's T1)",
            seen.committed,
        )
        yield self._per_partition(
            "splitstate_end_offset", "end offset per owned partition, as last read", seen.ends
        )
        lag = {p: max(0, end - seen.committed.get(p, 0)) for p, end in seen.ends.items()}
        yield self._per_partition(
            "splitstate_lag_records",
            "records not yet committed per owned partition (end - committed)",
            lag,
        )

    def _scaling(self, seen: Observation) -> Iterator[GaugeMetricFamily]:
        catchup = seen.catchup
        t1 = {} if catchup is None else catchup.t1
        t2 = {} if catchup is None else catchup.t2
        lag = {} if catchup is None else catchup.lag
        yield self._per_partition(
            "splitstate_catchup_t1_offset",
            "a receiver's T1 per gained partition: the group's committed offset (F once released)",
            t1,
        )
        yield self._per_partition(
            "splitstate_catchup_t2_offset",
            "a receiver's T2 per gained partition: how far its state is built",
            t2,
        )
        yield self._per_partition(
            "splitstate_catchup_lag_records", "a receiver's T1 - T2 per gained partition", lag
        )
        handoffs = self._gauge(
            "splitstate_handoff_phase",
            "phase of each handoff of the scale in force involving this processor (1: in "
            "force); role: source (old owner) or target (receiver)",
            [*_HANDOFF, "phase"],
        )
        for view in seen.handoffs:
            role = "source" if view.source == self._processor else "target"
            where = [str(view.generation), str(view.source), str(view.target), role]
            for phase in HandoffPhase:
                value = 1.0 if view.phase == phase.value else 0.0
                handoffs.add_metric([*self._values, *where, phase.value], value)
        yield handoffs

    def _snapshots_and_growth(self, seen: Observation) -> Iterator[GaugeMetricFamily]:
        if seen.snapshot_created is not None:
            yield self._one(
                "splitstate_snapshot_age_seconds",
                "seconds since the newest durable snapshot was taken",
                max(0.0, self._wall() - seen.snapshot_created),
            )
        yield self._one(
            "splitstate_snapshot_uploading",
            "1 while a snapshot is being copied",
            1.0 if seen.snapshot_uploading else 0.0,
        )
        yield self._one(
            "splitstate_growth_gates_held",
            "input partitions an ordering gate holds at a record (a growth's new life, or a "
            "survivor's key merged from a partition not drained yet)",
            seen.gates_held,
        )
        yield self._one(
            "splitstate_lease_age_seconds",
            "seconds since the output lease was renewed from the topic registry",
            seen.lease_age,
        )
        yield self._one(
            "splitstate_lease_fresh",
            "1 while the output lease is within its length",
            1.0 if seen.lease_age <= seen.lease_seconds else 0.0,
        )
