"""Who may write a processor's facts to the control log, and a receiver's stops and resumes
(pure; no I/O).

**Instances.** Every run of a processor id records itself first (an ``instance`` record with
a random id). From control-log format 2 on, each fact a processor writes (its handoff events,
``stopped``, ``resumed``) carries the writer's ``instance``, and a reader applies it only when
that instance is the processor's newest one at that point of the log. A second copy of a
processor (a mistaken second pod) therefore cannot move a scale on; once it reads the newer
instance's record it stops (``framework.runtime``). In a format-1 log (written before format
records) facts without an instance still apply, as they did then.

**Stops.** A receiver whose catch-up cannot go on writes ``stopped`` with the reason and
where (``at``): the failing record's position, or ``None`` for a stop of the whole processor
(history lost to retention, a failed bulk build, a broken protocol invariant). While it is
stopped its sources hold their releases. From format 2 on only ``resumed`` ends a stop:

- written by a later instance of the receiver once it has read past ``at`` with no lag on
  any open incoming handoff (the runtime checks that before writing), for a stop at a record;
- written by an operator (``splitstate scale --resume``) for any stop; the command refuses
  when that is unsafe (it says why).

In a format-1 log any handoff event of the receiver ends its stop, as it did then.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rebalance.states import HandoffEvent

__all__ = [
    "CONTROL_FORMAT",
    "Stop",
    "StopPoint",
    "format_record",
    "resumed_record",
    "stopped_record",
    "writer_of",
]

#: the newest control-log format this code reads and writes (1: a log without format records)
CONTROL_FORMAT = 2

#: a record's place: ``(topic, partition, offset)``
StopPoint = tuple[str, int, int]


@dataclass(frozen=True)
class Stop:
    """Why and where a receiver stopped, and which of its instances stopped."""

    reason: str
    #: the failing record (``None``: the whole processor stopped; only an operator resumes it)
    at: StopPoint | None = None
    instance: str | None = None
    #: where ``at`` was met: in the receiver's catch-up, or in its own processing
    during: str = "catch-up"

    def matches(self, record: Mapping[str, Any]) -> bool:
        """Whether a ``resumed`` record ends this stop: it names this stop's run and record
        (one that names none, written before resumes named their stop, ends any)."""
        if "stop_instance" not in record:
            return True
        at = record.get("stop_at")
        named = None if at is None else (str(at[0]), int(at[1]), int(at[2]))
        return record.get("stop_instance") == self.instance and named == self.at

    def __str__(self) -> str:
        return self.reason

    @property
    def where(self) -> str:
        """Where it stopped, in words: ``at <topic>[<partition>]@<offset>``, or
        ``as a whole``."""
        if self.at is None:
            return "as a whole"
        topic, partition, offset = self.at
        return f"at {topic}[{partition}]@{offset}"


def format_record(version: int) -> dict[str, Any]:
    """A ``format`` record: from here on the log is written in format ``version``."""
    return {"type": "format", "version": version}


def stopped_record(
    generation: int,
    processor: int,
    reason: str,
    *,
    at: StopPoint | None,
    instance: str | None,
    during: str = "catch-up",
) -> dict[str, Any]:
    """A ``stopped`` record: receiver ``processor`` stopped catching up in ``generation``
    (``during``: ``catch-up``, or ``processing`` when its own processing stopped it)."""
    record: dict[str, Any] = {
        "type": "stopped",
        "generation": generation,
        "processor": processor,
        "reason": reason,
        "at": None if at is None else list(at),
        "during": during,
    }
    if instance is not None:
        record["instance"] = instance
    return record


def resumed_record(
    generation: int,
    processor: int,
    stop: Stop,
    *,
    instance: str | None = None,
    request: str | None = None,
) -> dict[str, Any]:
    """A ``resumed`` record: ``stop`` of receiver ``processor`` in ``generation`` is over
    (only that stop: a later one is not ended by it), said by that processor's ``instance``
    or (``instance`` ``None``) by an operator (``request``: an id the operator finds the
    record by)."""
    record: dict[str, Any] = {
        "type": "resumed",
        "generation": generation,
        "processor": processor,
        "by": "operator" if instance is None else "processor",
        "stop_instance": stop.instance,
        "stop_at": None if stop.at is None else list(stop.at),
    }
    if instance is not None:
        record["instance"] = instance
    if request is not None:
        record["request"] = request
    return record


def stop_of(record: Mapping[str, Any]) -> Stop:
    """The ``Stop`` a ``stopped`` record says (``ValueError`` on a malformed ``at``)."""
    raw = record.get("at")
    at: StopPoint | None = None
    if raw is not None:
        topic, partition, offset = raw
        at = (str(topic), int(partition), int(offset))
    instance = record.get("instance")
    return Stop(
        str(record.get("reason") or "stopped"),
        at,
        None if instance is None else str(instance),
        str(record.get("during") or "catch-up"),
    )


def writer_of(record: Mapping[str, Any]) -> int | None:
    """The processor that writes ``record`` (``None``: an operator's record, or one any
    process may write): RELEASE is its source's, every other handoff event its target's."""
    kind = record.get("type")
    if kind == "handoff":
        event = str(record.get("event"))
        return int(record["source" if event == HandoffEvent.RELEASE.value else "target"])
    if kind == "stopped" or (kind == "resumed" and record.get("by") != "operator"):
        return int(record["processor"])
    return None


def refuse_writer(
    record: Mapping[str, Any], log_format: int, instances: Mapping[int, str]
) -> str | None:
    """Why a processor's ``record`` must be ignored for its writer's instance, or ``None``
    when it applies (``log_format``: the log's format at this record; ``instances``: each
    processor's newest instance there)."""
    writer = writer_of(record)
    if writer is None:
        return None
    instance = record.get("instance")
    newest = instances.get(writer)
    if instance is None:
        if log_format < 2:
            return None  # written before records carried instances: applied, as it was then
        return (
            f"a {record.get('type')} record of processor {writer} without an instance "
            f"(written by a splitstate older than this log's format {log_format})"
        )
    if str(instance) != newest:
        return (
            f"a {record.get('type')} record of processor {writer}'s instance {instance}, "
            f"which is not its newest ({newest}): a replaced run of it wrote it"
        )
    return None
