"""What a processor process's log lines are about: its app, its processor id, its generation.

One processor runs per process, so this is one value per process: ``splitstate run`` sets
``app`` and ``processor`` as it starts, and the runtime keeps ``generation`` current (the
generation in force, noted whenever the control log changes it, so it moves during a scale).
``framework.ops.logs`` puts the three on every log record (JSON lines carry them).
"""

from __future__ import annotations

from dataclasses import dataclass

from rebalance.control import ControlState

__all__ = ["LOG_CONTEXT", "LogContext", "note_generation"]


@dataclass
class LogContext:
    """The app id, processor id and generation in force (``None``: not known, or none)."""

    app: str | None = None
    processor: int | None = None
    generation: int | None = None


#: this process's context (a ``splitstate run`` process runs one processor, or a supervisor)
LOG_CONTEXT = LogContext()


def note_generation(state: ControlState) -> None:
    """Take the generation in force from the control state (a ``ControlWatcher`` listener)."""
    LOG_CONTEXT.generation = None if state.generation is None else state.generation.generation
