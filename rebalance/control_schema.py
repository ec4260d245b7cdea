"""The shape of every control-log record, checked in this one place before any rule of
``ControlState`` reads it (pure).

``check_record`` takes a record (a JSON object) and returns it as its kind's schema reads
it, or ``None`` for a kind this splitstate does not know; a record of a known kind that does
not fit its schema (a missing field, a value of the wrong JSON type, a number out of range,
an unknown handoff event) raises ``MalformedRecordError`` naming the field.

What a reader does with each outcome, and why:

- **A malformed record is refused**, by every reader at the same record, until it is
  removed: the control log is this app's alone, and each record in it is a fact of the
  protocol that some process meant to state. Skipping one could change who owns a
  partition, differently for a reader that reads it (another version, a later fix), and a
  guess at what it meant could be wrong; refusing changes nothing. The framework names the
  record's offset and how to remove it (``framework.coordination.control_log``).
- **A record of an unknown kind is ignored and noted**, as it always was: a newer
  splitstate may add kinds that older readers skip, and writes a ``format`` record first
  when older readers must not go on (``rebalance.control_stops``), so skipping one is what
  its writer expects. No reader applies it, so all agree.
- **Fields a schema does not name are left out**, for the same reason: a newer writer may
  add some. The rules read only the fields returned here.

A record that has the right shape but does not fit the current state (a stale generation, an
event its phase does not allow) is the protocol's own business: ``ControlState`` ignores it
the same way for everyone.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from rebalance.record_checks import (
    Count,
    Index,
    IndexKey,
    MalformedRecordError,
    Offset,
    PartitionCount,
    Signed64,
    Text,
    describe,
    shown,
)
from rebalance.states import HandoffEvent
from rebalance.step_records import StepRecord

__all__ = ["KINDS", "SCHEMAS", "check_record"]


def _event(value: str) -> str:
    if value not in _EVENTS:
        raise ValueError(f"{shown(value)} is not a handoff event (those are {sorted(_EVENTS)})")
    return value


_EVENTS = frozenset(event.value for event in HandoffEvent)


Event = Annotated[Text, AfterValidator(_event)]
#: a record's place: topic, partition, offset
Point = tuple[Text, Index, Offset]


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class _App(_Record):
    app_id: Text
    initial_processors: Count
    inputs: Annotated[dict[Text, PartitionCount], Field(min_length=1)]
    key_hash: Text = "murmur3"
    epoch: Text | None = None


class _Generation(_Record):
    generation: Index
    processors: Count


class _History(_Record):
    counts: Annotated[list[PartitionCount], Field(min_length=1)]
    thresholds: dict[IndexKey, Offset] = Field(default_factory=dict)
    steps: list[StepRecord] | None = None


class _Scale(_Record):
    generation: Index
    processors: Count
    partitions: dict[Text, PartitionCount]
    histories: dict[Text, _History] | None = None
    request: Text | None = None


class _Handoff(_Record):
    generation: Index
    source: Index
    target: Index
    event: Event
    offsets: list[Point] | None = None
    request: Text | None = None
    instance: Text | None = None

    @model_validator(mode="after")
    def _release_gives_offsets(self) -> Self:
        if self.event == HandoffEvent.RELEASE and self.offsets is None:
            raise ValueError("a RELEASE gives the offsets F of the partitions it hands off")
        return self


class _Abort(_Record):
    generation: Index
    reason: Text | None = None


class _Stopped(_Record):
    generation: Index
    processor: Index
    reason: Text | None = None
    at: Point | None = None
    during: Text | None = None
    instance: Text | None = None


class _Resumed(_Record):
    generation: Index
    processor: Index
    by: Literal["operator", "processor"] | None = None
    stop_instance: Text | None = None
    stop_at: Point | None = None
    instance: Text | None = None
    request: Text | None = None


class _Growth(_Record):
    topic: Text
    partitions: PartitionCount
    request: Text | None = None


#: the largest time a mark holds (``framework.order.marks.LARGEST``)
_MARK_LIMIT = (1 << 62) - 1


class _GrowthBase(_Record):
    topic: Text
    partition: Index
    start: Offset
    base: Annotated[Signed64, Field(ge=-_MARK_LIMIT, le=_MARK_LIMIT)]


class _MetadataHash(_Record):
    hash: Signed64


class _Snapshot(_Record):
    request: Text
    processor: Index | None = None


class _Instance(_Record):
    processor: Index
    instance: Text


class _Format(_Record):
    version: Count


_SCHEMAS: dict[str, type[_Record]] = {
    "app": _App,
    "generation": _Generation,
    "scale": _Scale,
    "handoff": _Handoff,
    "abort": _Abort,
    "stopped": _Stopped,
    "resumed": _Resumed,
    "growth": _Growth,
    "growth_done": _Growth,
    "growth_base": _GrowthBase,
    "metadata_hash": _MetadataHash,
    "snapshot": _Snapshot,
    "instance": _Instance,
    "format": _Format,
}

#: the record kinds this splitstate reads
KINDS = frozenset(_SCHEMAS)
#: each kind's schema (read only; the docs' reference lists their fields)
SCHEMAS: Mapping[str, type[BaseModel]] = MappingProxyType(_SCHEMAS)


def check_record(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """``record`` as its kind's schema reads it (only the fields the schema names, each as
    written; a field left out stays out), or ``None`` when its ``type`` is a kind this
    splitstate does not know. Raises ``MalformedRecordError`` when it has no ``type`` or
    does not fit its kind's schema."""
    kind = record.get("type")
    if not isinstance(kind, str):
        raise MalformedRecordError(f"its type is {shown(kind)}, not a string naming its kind")
    schema = _SCHEMAS.get(kind)
    if schema is None:
        return None
    try:
        checked = schema.model_validate(record)
    except ValidationError as error:
        problem = f"a record of kind {kind!r} that does not fit: {describe(error)}"
        raise MalformedRecordError(problem) from None
    return {"type": kind, **checked.model_dump(mode="json", exclude_unset=True)}
