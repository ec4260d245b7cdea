"""Errors that splitstate reports to its user: each names the problem and the fix."""

from __future__ import annotations

import traceback

__all__ = [
    "ProcessorFencedError",
    "ProcessorReplacedError",
    "ProcessorStoppedError",
    "SplitstateError",
    "describe_error",
]


def describe_error(error: BaseException, with_trace: bool = False) -> str:
    """``Type: message`` of ``error`` (with its last three frames when ``with_trace``), as
    dead letters and crash reports show it."""
    text = f"{type(error).__name__}: {error}"
    if with_trace:
        frames = traceback.extract_tb(error.__traceback__)[-3:]
        where = "; ".join(f"{f.filename}:{f.lineno} in {f.name}" for f in frames)
        text += f" (at {where})"
    return text


class SplitstateError(Exception):
    """A problem the user can fix; its message says what went wrong and what to do.

    The CLI prints these as one clear message (no traceback) and exits with status 2.
    """


class ProcessorStoppedError(SplitstateError):
    """The processor function failed on a record and ``on_error`` is ``stop`` (or another
    cause stops the processor, or its catch-up). ``at``: the record it stopped at
    (``(topic, partition, offset)``), when one record is the cause."""

    def __init__(self, message: str, *, at: tuple[str, int, int] | None = None) -> None:
        super().__init__(message)
        self.at = at


class ProcessorFencedError(ProcessorStoppedError):
    """Another instance of the same processor started since this one (its transactional
    producer fenced this one's): this one stops, and says nothing in the control log (the
    other instance speaks for the processor now)."""


class ProcessorReplacedError(ProcessorFencedError):
    """The control log records a newer instance of this processor than this run: this run
    stops before it writes anything more (the control log ignores what it would write)."""

    def __init__(self, processor: int, instance: str, newest: str | None) -> None:
        super().__init__(
            f"processor {processor} was replaced: a newer run of it (instance {newest}) "
            f"recorded itself in the control log, so this run (instance {instance}) stops and "
            "writes nothing more. Fix: run each processor id once (stop the other instance "
            "first when moving a processor to another machine)."
        )
