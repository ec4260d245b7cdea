"""A topic registry entry (``TopicEntry``) and its record: what the registry knows about one
topic, written as JSON and read through a strict schema (``MalformedRecordError`` when a
record does not fit). ``framework.coordination.registry`` reads and writes the entries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

from rebalance import TopicHistory
from rebalance.record_checks import (
    Count,
    IndexKey,
    MalformedRecordError,
    Offset,
    Text,
    describe,
)
from rebalance.step_records import StepRecord, history_of_record, steps_record
from rebalance.steps import Grow

__all__ = [
    "DEFAULT_DELIVERY_TIMEOUT_MS",
    "DEFAULT_LEASE_MS",
    "Change",
    "Growth",
    "TopicEntry",
]


#: How long a producer may place keys with the count it last read from the registry.
DEFAULT_LEASE_MS = 10_000
#: The longest a producer may keep trying to deliver a record (librdkafka delivery.timeout.ms).
DEFAULT_DELIVERY_TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class Growth:
    """A change of the topic's count to ``partitions`` in progress (each step resumable):
    ``kind`` ``"grow"`` (a growth) or ``"shrink"`` (a shrink; ``Change`` is the same class).

    ``recorded_ms``: when the new count was recorded (producers switch within their lease);
    ``fence_ends``: each fenced partition's end offset once no old-count record can land any
    more (markers are written at or after it); ``markers``: for a growth, child -> its
    marker's offset; for a shrink, deleted partition -> its drain marker's offset; as
    written so far.
    """

    partitions: int
    recorded_ms: int
    fence_ends: Mapping[int, int] | None = None
    markers: Mapping[int, int] = field(default_factory=dict)
    kind: Literal["grow", "shrink"] = "grow"

    def to_record(self) -> dict[str, Any]:
        """JSON-able values."""
        return {
            "kind": self.kind,
            "partitions": self.partitions,
            "recorded_ms": self.recorded_ms,
            "fence_ends": None
            if self.fence_ends is None
            else {str(k): v for k, v in sorted(self.fence_ends.items())},
            "markers": {str(k): v for k, v in sorted(self.markers.items())},
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Growth:
        """Parse :meth:`to_record`'s output (``MalformedRecordError`` when it does not fit)."""
        return _growth_of(_checked(_GrowthRecord, record))


#: a change of a topic's count in progress, a growth or a shrink (``Growth.kind``)
Change = Growth


@dataclass(frozen=True)
class TopicEntry:
    """What the registry knows about one topic."""

    history: TopicHistory
    key_hash: str = "murmur3"
    lease_ms: int = DEFAULT_LEASE_MS
    delivery_timeout_ms: int = DEFAULT_DELIVERY_TIMEOUT_MS
    growth: Growth | None = None
    #: the topic is compacted (``cleanup.policy`` has ``compact``)
    compacted: bool = False

    @property
    def fence_ms(self) -> int:
        """How long after a new count is recorded old-count records may still land."""
        return self.lease_ms + self.delivery_timeout_ms

    def pending(self) -> list[int]:
        """Partitions whose last change is not fully recorded (blocked): grown by a growth
        whose marker is not recorded yet, or deleted by a shrink whose drain marker is not."""
        pending: set[int] = set()
        history = self.history
        for step, before in zip(history.steps, history.counts, strict=False):
            if isinstance(step, Grow):
                changed, recorded = range(before, step.count), step.markers
            else:
                changed, recorded = range(step.count, before), step.drains
            pending -= set(changed)
            pending |= {p for p in changed if p not in recorded}
        return sorted(pending)

    @property
    def topic(self) -> str:
        """The topic's name."""
        return self.history.name

    @property
    def initial_partitions(self) -> int:
        """``N``."""
        return self.history.initial_partitions

    @property
    def partitions(self) -> int:
        """``M``, the count producers place keys with."""
        return self.history.partitions

    def to_record(self) -> dict[str, Any]:
        """The registry record."""
        return {
            "topic": self.topic,
            "initial_partitions": self.initial_partitions,
            "counts": list(self.history.counts),
            "thresholds": {str(k): v for k, v in sorted(self.history.thresholds.items())},
            "steps": steps_record(self.history),
            "key_hash": self.key_hash,
            "lease_ms": self.lease_ms,
            "delivery_timeout_ms": self.delivery_timeout_ms,
            "growth": None if self.growth is None else self.growth.to_record(),
            "compacted": self.compacted,
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> TopicEntry:
        """Parse a registry record (``MalformedRecordError`` when it does not fit)."""
        checked = _checked(_EntryRecord, record)
        history = history_of_record(
            checked.topic, checked.counts, checked.thresholds, checked.steps
        )
        growth = checked.growth
        return cls(
            history,
            checked.key_hash,
            checked.lease_ms,
            checked.delivery_timeout_ms,
            None if growth is None else _growth_of(growth),
            checked.compacted,
        )


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class _GrowthRecord(_Record):
    """The schema of a change in progress (``Growth.to_record``)."""

    kind: Literal["grow", "shrink"] = "grow"
    partitions: Count
    recorded_ms: Offset
    fence_ends: dict[IndexKey, Offset] | None = None
    markers: dict[IndexKey, Offset] = Field(default_factory=dict)


class _EntryRecord(_Record):
    """The schema of a registry record (``TopicEntry.to_record``); fields written by later
    versions are left out, and those older versions did not write take their defaults."""

    topic: Text
    counts: list[Count] = Field(min_length=1)
    thresholds: dict[IndexKey, Offset] = Field(default_factory=dict)
    key_hash: Text = "murmur3"
    lease_ms: Count = DEFAULT_LEASE_MS
    delivery_timeout_ms: Count = DEFAULT_DELIVERY_TIMEOUT_MS
    growth: _GrowthRecord | None = None
    #: written since shrinks: without it, the growths of ``counts`` with lives from offset 0
    steps: list[StepRecord] | None = None
    compacted: StrictBool = False


_Schema = TypeVar("_Schema", bound=BaseModel)


def _checked(schema: type[_Schema], record: Mapping[str, Any]) -> _Schema:
    """``record`` read by ``schema`` (``MalformedRecordError`` naming what does not fit)."""
    try:
        return schema.model_validate(record)
    except ValidationError as error:
        raise MalformedRecordError(describe(error)) from None


def _growth_of(record: _GrowthRecord) -> Growth:
    ends = record.fence_ends
    return Growth(
        record.partitions,
        record.recorded_ms,
        None if ends is None else {int(k): v for k, v in ends.items()},
        {int(k): v for k, v in record.markers.items()},
        record.kind,
    )
