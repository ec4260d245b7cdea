"""Applying ``stopped`` and ``resumed`` records to the scale in progress (pure; the rules are
in ``rebalance.control_stops``). Each function returns the scale after the record, or why
the record is ignored."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from rebalance.control_records import Scale
from rebalance.control_stops import stop_of

__all__ = ["apply_resumed", "apply_stopped"]


def apply_stopped(scale: Scale | None, record: Mapping[str, Any]) -> Scale | str:
    """``scale`` with the receiver of a ``stopped`` record stopped."""
    number, processor = int(record["generation"]), int(record["processor"])
    if scale is None or scale.generation != number or not scale.incoming(processor):
        return (
            f"a stop of processor {processor} in generation {number}, where it receives "
            "nothing in a scale in progress"
        )
    return replace(scale, stopped={**scale.stopped, processor: stop_of(record)})


def apply_resumed(scale: Scale | None, record: Mapping[str, Any]) -> Scale | str:
    """``scale`` with the stop a ``resumed`` record names ended."""
    number, processor = int(record["generation"]), int(record["processor"])
    stop = None if scale is None else scale.stopped.get(processor)
    if scale is None or scale.generation != number or stop is None:
        return (
            f"a resume of processor {processor} in generation {number}, which is not "
            "stopped in a scale in progress"
        )
    if not stop.matches(record):
        return (
            f"a resume of an earlier stop of processor {processor} in generation {number}: "
            f"it stopped again since ({stop.reason})"
        )
    if record.get("by") != "operator":
        if stop.at is None:
            return (
                f"processor {processor} resumed itself in generation {number}, but the "
                "whole processor had stopped: only an operator resumes that"
            )
        if stop.instance is not None and record.get("instance") == stop.instance:
            return (
                f"processor {processor} resumed itself in generation {number} with the "
                "instance that stopped: a later run must get past the stop"
            )
    return replace(scale, stopped={j: s for j, s in scale.stopped.items() if j != processor})
