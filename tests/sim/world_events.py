"""What happened in a simulated world (``Events``): for the checks and the failure report."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Events"]


@dataclass
class Events:
    """What happened in a world (for the checks and the failure report)."""

    kills: list[str] = field(default_factory=list)
    lost_disks: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    compactions: int = 0
    retention: int = 0
    #: processes (``name#incarnation``, the origin of what they wrote) that were killed or
    #: stopped on an error: only their batches may have been cut short
    cut_short: set[str] = field(default_factory=set)
    #: processors that stopped naming a cause the world never had (``tests.sim.world.FALSE_ALARMS``)
    false_alarms: list[str] = field(default_factory=list)
    #: why a processor stopped for the operator (``ProcessorStoppedError``), if one did
    halted: str | None = None
    #: when the clock jumped 12 days (a plan with ``days_later``), if it did
    jumped_at: float | None = None
    #: the wall clock (epoch ms, as record timestamps) right after the jump
    jumped_ms: int | None = None
    #: commands that reported success for what did not happen (a racing operator's scale)
    false_reports: list[str] = field(default_factory=list)
    #: what the twin of a processor did (a plan with ``twin``)
    twin: list[str] = field(default_factory=list)
    #: runs (``name#incarnation``) of the twinned processor while two instances of it were
    #: deployed: under at-least-once both may emit a record's outputs
    twinned: set[str] = field(default_factory=set)
    #: the offsets that ``ControlRecordError`` named, each time a party stopped at a
    #: control-log record no reader can read (``tests/sim/junk.py``)
    control_refusals: list[int] = field(default_factory=list)
    #: input records the cleaner removed before the app's group had read past them (a plan
    #: with ``compacted``): no processor may ever have read them
    unread_compacted: set[tuple[int, int]] = field(default_factory=set)
    #: input records the cleaner removed
    input_compacted: int = 0
    #: when (epoch ms) a producer stalled between placing a record and queueing it went on,
    #: or the clock jumped (``tests/sim/aimed_changes.py``): a record it queued right after
    #: may be late
    resumes: list[int] = field(default_factory=list)
    #: registry records that gave the input fewer partitions than the app's processors
    below_processors: list[str] = field(default_factory=list)
