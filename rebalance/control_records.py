"""The facts of the control log, as values: the app's definition, generations, scales and
their handoffs, growths, and the JSON records that carry them (pure; no I/O)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rebalance import step_records
from rebalance.control_stops import Stop
from rebalance.lineage import TopicHistory
from rebalance.plan import ReceiverPlan
from rebalance.positions import Position
from rebalance.states import HandoffEvent, HandoffPhase

__all__ = [
    "AppDefinition",
    "Generation",
    "Handoff",
    "InputGrowth",
    "Scale",
    "SnapshotRequest",
    "abort_record",
    "handoff_record",
    "history_from_record",
    "history_record",
    "instance_record",
    "request_of",
]


@dataclass(frozen=True)
class AppDefinition:
    """The parameters that never change for an app."""

    app_id: str
    initial_processors: int
    inputs: dict[str, int]
    key_hash: str = "murmur3"
    #: a random id of this control log's app: an app started over (a new control log) gets
    #: another, so state snapshots of the old one are never taken for its (``None``: a log
    #: written before epochs)
    epoch: str | None = field(default=None, compare=False)

    def to_record(self) -> dict[str, Any]:
        """The ``app`` record."""
        record: dict[str, Any] = {
            "type": "app",
            "app_id": self.app_id,
            "initial_processors": self.initial_processors,
            "inputs": dict(sorted(self.inputs.items())),
            "key_hash": self.key_hash,
        }
        if self.epoch is not None:
            record["epoch"] = self.epoch
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> AppDefinition:
        """Parse an ``app`` record."""
        return cls(
            app_id=str(record["app_id"]),
            initial_processors=int(record["initial_processors"]),
            inputs={str(k): int(v) for k, v in dict(record["inputs"]).items()},
            key_hash=str(record.get("key_hash", "murmur3")),
            epoch=None if record.get("epoch") is None else str(record["epoch"]),
        )


@dataclass(frozen=True)
class Generation:
    """A processor count in force from a generation on."""

    generation: int
    processors: int

    def to_record(self) -> dict[str, Any]:
        """The ``generation`` record (generation 0 only; later ones come from scales)."""
        return {"type": "generation", "generation": self.generation, "processors": self.processors}


@dataclass(frozen=True)
class Handoff:
    """One (source -> target) part of a scale: its phase and, once released, the offsets F."""

    source: int
    target: int
    partitions: tuple[Position, ...]
    phase: HandoffPhase = HandoffPhase.PLANNED
    released: Mapping[Position, int] = field(default_factory=dict)


def abort_record(generation: int, reason: str) -> dict[str, Any]:
    """An ``abort`` record for the scale of ``generation``."""
    return {"type": "abort", "generation": generation, "reason": reason}


def instance_record(processor: int, instance: str) -> dict[str, Any]:
    """An ``instance`` record: a run of ``processor`` (``instance``, a random id) started and
    took over its transactional id (exactly-once), fencing any earlier run."""
    return {"type": "instance", "processor": processor, "instance": instance}


def history_record(history: TopicHistory) -> dict[str, Any]:
    """An input's partition-count history (counts, thresholds, steps), as JSON-able values."""
    return step_records.history_record(history)


def history_from_record(name: str, record: Mapping[str, Any]) -> TopicHistory:
    """Parse :func:`history_record`'s output for topic ``name`` (``MalformedRecordError``,
    a ``ValueError``, when it does not form a history)."""
    return step_records.history_of_record(
        name,
        [int(c) for c in record["counts"]],
        {str(c): int(o) for c, o in dict(record.get("thresholds", {})).items()},
        record.get("steps"),
    )


@dataclass(frozen=True)
class Scale:
    """A change of processor count, in progress or done.

    ``histories``: each input's partition history as the scale planned it (thresholds bound
    the ancestors a receiver reads)."""

    generation: int
    old_processors: int
    new_processors: int
    partitions: Mapping[str, int]
    handoffs: Mapping[tuple[int, int], Handoff]
    receivers: Mapping[int, ReceiverPlan]
    histories: Mapping[str, TopicHistory] = field(default_factory=dict)
    aborted: str | None = None
    #: receivers that stopped catching up, until resumed
    stopped: Mapping[int, Stop] = field(default_factory=dict)
    request: str | None = None
    #: request ids of RELEASEs ignored because their receiver had stopped first
    refused: frozenset[str] = frozenset()

    @property
    def complete(self) -> bool:
        """Whether every handoff completed."""
        return all(h.phase is HandoffPhase.COMPLETE for h in self.handoffs.values())

    @property
    def ended(self) -> bool:
        """Whether the scale is over: complete, or aborted."""
        return self.aborted is not None or self.complete

    def incoming(self, processor: int) -> list[Handoff]:
        """Handoffs that give ``processor`` partitions."""
        return [h for h in self.handoffs.values() if h.target == processor]

    def outgoing(self, processor: int) -> list[Handoff]:
        """Handoffs that take partitions from ``processor``."""
        return [h for h in self.handoffs.values() if h.source == processor]


@dataclass(frozen=True)
class InputGrowth:
    """A growth of an input topic (``splitstate expand``) in progress; no scale meanwhile."""

    topic: str
    partitions: int
    request: str | None = None

    def to_record(self, done: bool = False) -> dict[str, Any]:
        """The ``growth`` record that starts it, or (``done``) the ``growth_done`` that ends it."""
        return {
            "type": "growth_done" if done else "growth",
            "topic": self.topic,
            "partitions": self.partitions,
            "request": self.request,
        }


def handoff_record(
    generation: int,
    source: int,
    target: int,
    event: HandoffEvent,
    offsets: Mapping[Position, int] | None = None,
    *,
    request: str | None = None,
    instance: str | None = None,
) -> dict[str, Any]:
    """A ``handoff`` record (``request``: an id its writer can find it by; ``instance``: the
    writing processor's run, see ``rebalance.control_stops``)."""
    record: dict[str, Any] = {
        "type": "handoff",
        "generation": generation,
        "source": source,
        "target": target,
        "event": event.value,
    }
    if offsets is not None:
        record["offsets"] = [[t, p, o] for (t, p), o in sorted(offsets.items())]
    if request is not None:
        record["request"] = request
    if instance is not None:
        record["instance"] = instance
    return record


def request_of(record: Mapping[str, Any]) -> str | None:
    request = record.get("request")
    return None if request is None else str(request)


@dataclass(frozen=True)
class SnapshotRequest:
    """An operator asked for a snapshot now (``splitstate snapshot take``): of every
    processor, or of ``processor`` only; ``id`` names it in the manifests it causes."""

    id: str
    processor: int | None = None

    def to_record(self) -> dict[str, Any]:
        """The ``snapshot`` record."""
        return {"type": "snapshot", "request": self.id, "processor": self.processor}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> SnapshotRequest:
        """Parse a ``snapshot`` record."""
        processor = record.get("processor")
        return cls(str(record["request"]), None if processor is None else int(processor))

    def asks(self, processor: int) -> bool:
        """Whether it asks ``processor`` for a snapshot."""
        return self.processor is None or self.processor == processor
