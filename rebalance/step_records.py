"""A partition-count history as JSON (the topic registry and the control log write it).

``counts`` and ``thresholds`` are written as before (readers that know only growths read
them); ``steps`` is a list of ``{"kind": "grow", "count", "starts", "markers"}`` and
``{"kind": "shrink", "count", "holds", "drains"}`` objects (partition keys as decimal strings).
A record without ``steps`` was written before shrinks existed: its counts grow, and each
growth is a ``Grow`` whose lives start at offset 0 with ``thresholds`` as its markers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from rebalance.lineage import TopicHistory
from rebalance.record_checks import Count, IndexKey, MalformedRecordError, Offset, describe
from rebalance.steps import Grow, Shrink, Step

__all__ = [
    "GrowRecord",
    "ShrinkRecord",
    "StepRecord",
    "history_of_record",
    "history_record",
    "steps_record",
]


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class GrowRecord(_Record):
    """The schema of a ``Grow`` step."""

    kind: Literal["grow"]
    count: Count
    starts: dict[IndexKey, Offset]
    markers: dict[IndexKey, Offset] = Field(default_factory=dict)


class ShrinkRecord(_Record):
    """The schema of a ``Shrink`` step."""

    kind: Literal["shrink"]
    count: Count
    holds: dict[IndexKey, Offset]
    drains: dict[IndexKey, Offset] = Field(default_factory=dict)


#: one step of ``steps``, by its ``kind``
StepRecord = Annotated[GrowRecord | ShrinkRecord, Field(discriminator="kind")]

_STEPS: TypeAdapter[list[StepRecord]] = TypeAdapter(list[StepRecord])


def _keyed(values: Mapping[int, int]) -> dict[str, int]:
    return {str(k): v for k, v in sorted(values.items())}


def _ints(values: Mapping[str, int]) -> dict[int, int]:
    return {int(k): v for k, v in values.items()}


def steps_record(history: TopicHistory) -> list[dict[str, Any]]:
    """``history``'s steps as JSON-able values."""
    written: list[dict[str, Any]] = []
    for step in history.steps:
        if isinstance(step, Grow):
            written.append(
                {
                    "kind": "grow",
                    "count": step.count,
                    "starts": _keyed(step.starts),
                    "markers": _keyed(step.markers),
                }
            )
        else:
            written.append(
                {
                    "kind": "shrink",
                    "count": step.count,
                    "holds": _keyed(step.holds),
                    "drains": _keyed(step.drains),
                }
            )
    return written


def history_record(history: TopicHistory) -> dict[str, Any]:
    """``counts``, ``thresholds`` and ``steps`` of ``history``, as JSON-able values."""
    return {
        "counts": list(history.counts),
        "thresholds": _keyed(history.thresholds),
        "steps": steps_record(history),
    }


def history_of_record(
    name: str,
    counts: Sequence[int],
    thresholds: Mapping[str, int],
    steps: Sequence[GrowRecord | ShrinkRecord] | Sequence[Mapping[str, Any]] | None,
) -> TopicHistory:
    """The history of topic ``name`` a record states (``steps`` checked already or raw JSON
    values; ``None``: a record written before steps). ``MalformedRecordError`` naming what does
    not fit, also when ``thresholds`` disagree with the steps' markers."""
    try:
        if steps is None:
            return TopicHistory.of(name, counts, _ints(thresholds))
        checked: Sequence[GrowRecord | ShrinkRecord] = (
            [s for s in steps if isinstance(s, GrowRecord | ShrinkRecord)]
            if all(isinstance(s, GrowRecord | ShrinkRecord) for s in steps)
            else _STEPS.validate_python(list(steps))
        )
        built: list[Step] = [
            Grow(s.count, _ints(s.starts), _ints(s.markers))
            if isinstance(s, GrowRecord)
            else Shrink(s.count, _ints(s.holds), _ints(s.drains))
            for s in checked
        ]
        history = TopicHistory(name, tuple(counts), tuple(built))
    except ValidationError as error:
        raise MalformedRecordError(f"steps: {describe(error)}") from None
    except ValueError as error:  # counts and steps that do not form a history
        raise MalformedRecordError(str(error)) from None
    if _ints(thresholds) != dict(history.thresholds):
        raise MalformedRecordError(
            f"topic {name!r}: its thresholds {dict(_ints(thresholds))} disagree with the "
            f"markers of its steps {dict(history.thresholds)}"
        )
    return history
