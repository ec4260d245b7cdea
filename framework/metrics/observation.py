"""What the loop publishes for the endpoint: an immutable view of one moment of the run.

The loop's thread builds a new ``Observation`` between batches (at most about once a second)
and swaps it in; the endpoint's thread only reads the newest one, so a scrape never touches
the loop's live objects (nor Kafka, nor RocksDB).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rebalance.positions import Position

__all__ = ["PROCESSOR_PHASES", "CatchUpView", "HandoffView", "Observation"]

#: the processor's phases, one of which holds at a time (``splitstate_processor_phase``)
PROCESSOR_PHASES = (
    "starting",
    "restoring",
    "bootstrapping",
    "catching_up",
    "running",
    "idle",
    "stopping",
)


@dataclass(frozen=True)
class HandoffView:
    """One handoff of the scale in force that involves this processor."""

    generation: int
    source: int
    target: int
    #: the handoff's phase (``rebalance.HandoffPhase`` value, e.g. ``CATCHING_UP``)
    phase: str


@dataclass(frozen=True)
class CatchUpView:
    """A receiver's catch-up, per partition it gains: T1 (the group's committed offset, or F
    once released), T2 (how far its state is built) and the lag between them."""

    generation: int
    t1: Mapping[Position, int] = field(default_factory=dict)
    t2: Mapping[Position, int] = field(default_factory=dict)
    lag: Mapping[Position, int] = field(default_factory=dict)
    #: whether a bulk build (snapshots or Spark) still runs before the catch-up reads
    bootstrapping: bool = False


@dataclass(frozen=True)
class Observation:
    """The run's state for gauges and ``/readyz``, as of one moment between batches."""

    phase: str = "starting"
    #: whether ``/readyz`` answers 200, and why not when it does not
    ready: bool = False
    reason: str = "the processor is starting"
    #: next offset of the committed state, per owned partition (T1)
    committed: Mapping[Position, int] = field(default_factory=dict)
    #: end offset per owned partition, as last read from Kafka
    ends: Mapping[Position, int] = field(default_factory=dict)
    state_bytes: int | None = None
    catchup: CatchUpView | None = None
    handoffs: tuple[HandoffView, ...] = ()
    #: wall-clock time the newest snapshot was taken (``None``: none yet, or snapshots off)
    snapshot_created: float | None = None
    snapshot_uploading: bool = False
    #: input partitions an ordering gate holds at a record
    gates_held: int = 0
    #: seconds since the output lease was renewed from the topic registry, and its length
    lease_age: float = 0.0
    lease_seconds: float = 0.0
