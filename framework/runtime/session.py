"""What one run of a processor holds, shared by the loop and the handoff protocol."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from confluent_kafka import Consumer, Producer

from framework.coordination.control_log import ControlLog
from framework.coordination.control_watch import ControlWatcher
from framework.coordination.layout import AppLayout
from framework.coordination.topic_watch import TopicWatcher
from framework.growth.lease import RegistryLease
from framework.processing import RecordProcessor
from framework.runtime.catchup import CatchUp
from framework.runtime.moved_keys import MovedKeys
from rebalance.positions import Position
from statestore import ProcessorDatabase

__all__ = ["RuntimeStats", "Session"]


@dataclass
class RuntimeStats:
    """Counters of one processor run."""

    records: int = 0
    restored: int = 0
    outputs: int = 0
    dead_letters: int = 0
    batches: int = 0
    started: float = field(default_factory=time.monotonic)


@dataclass
class Session:
    """Everything one run of a processor holds: clients, state, ownership, the catch-up."""

    layout: AppLayout
    database: ProcessorDatabase
    consumer: Consumer
    producer: Producer
    watcher: ControlWatcher
    control: ControlLog
    records: RecordProcessor
    outputs: RegistryLease
    topics: TopicWatcher
    moved: MovedKeys
    owned: set[Position] = field(default_factory=set)
    restore_below: dict[Position, int] = field(default_factory=dict)
    catchup: CatchUp | None = None
    sent: set[tuple[int, int, int, str]] = field(default_factory=set)
    released: dict[int, set[Position]] = field(default_factory=dict)
    blocked: dict[Position, str] = field(default_factory=dict)
    gates_checked: float = 0.0
    #: generations whose catch-up stopped here, with the reason (until a restart or an abort)
    failed: dict[int, str] = field(default_factory=dict)
    #: things already logged once (not to repeat a line every batch)
    notes: set[str] = field(default_factory=set)

    def owned_now(self, processor: int) -> set[Position]:
        """What the control log says this processor owns, less what it released itself
        (its own RELEASE may not have come back through the log yet)."""
        state = self.watcher.state
        owned = state.owned(processor, self.counts)
        scale = state.scaling
        if scale is not None:
            owned -= self.released.get(scale.generation, set())
        return owned

    @property
    def counts(self) -> dict[str, int]:
        """Each input topic's partition count."""
        return {name: entry.partitions for name, entry in self.layout.inputs.items()}
