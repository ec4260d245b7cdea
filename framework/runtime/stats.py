"""The counters of one processor run (``ProcessorRuntime.stats``)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RuntimeStats"]


@dataclass
class RuntimeStats:
    """Counters of one processor run."""

    records: int = 0
    restored: int = 0
    outputs: int = 0
    dead_letters: int = 0
    batches: int = 0
    #: records this run's catch-ups took in order (applied, or passed over as not gained)
    replayed: int = 0
    #: when the run started, on its clock
    started: float = 0.0
