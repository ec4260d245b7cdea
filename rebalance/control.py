"""The app's control log as a deterministic state machine (pure; the log itself is Kafka's).

Every reader applies the same records in log order to ``ControlState.apply`` and so reaches
the same state. A record that does not fit the current state (a second, different app
definition; a stale generation; a handoff event its phase does not allow) is ignored the same
way by everyone, and ``apply`` notes why.

Records are JSON objects with a ``type``:

- ``app``: the fixed parameters: ``app_id``, ``initial_processors`` (B), ``inputs`` (topic ->
  initial partition count N), ``key_hash``. Written once, when the app first starts.
- ``generation``: generation 0 and its processor count, written with the app definition.
- ``scale``: starts generation ``g`` (the current one + 1) with ``processors`` P' over the
  input partition counts ``partitions`` seen when it was asked for, each input's
  ``histories`` (partition counts and growth thresholds, from the topic registry) so every
  reader bounds the same ancestors, and the asker's random ``request`` id. The moves and each
  receiver's S1/S2 follow from ``rebalance.plan_scale``; every (source, target) pair is one
  handoff, PLANNED. Refused while another scale or a growth is in progress: of two racing
  requests the first in log order wins, and each asker learns which by reading the log back
  (``Scale.request``).
- ``growth`` / ``growth_done``: ``splitstate expand`` of input ``topic`` to ``partitions``
  starts (with its ``request`` id) and finishes. A growth is refused while a scale or another
  growth is in progress (the same growth again is the expand resumed, and changes nothing);
  a ``growth_done`` naming another request than the growth in progress is ignored.
- ``growth_base``: a growth child's base mark (``topic``, ``partition``, its life's
  ``start``, ``base``), written by whoever read its parent past the marker; the first
  record of a life applies (writers compute the same value, except one that resumed the
  parent without its mark: ``growth_bases``).
- ``handoff``: an ``event`` of the catch-up protocol for one (``source``, ``target``) pair of
  generation ``g``, applied through ``HANDOFF_MACHINE``; ``RELEASE`` carries the final
  ``offsets`` F of the moved partitions. When every handoff of a scale is COMPLETE, the scale's
  processor count is in force.
- ``abort``: abandons the scale in progress of ``generation``, with a ``reason``: every
  handoff becomes ABORTED, the old owners keep their partitions and the processor count in
  force stays. Applied only while no handoff has been RELEASED (after a release the receiver is
  responsible from F and the scale can only finish); otherwise ignored as a whole, so an abort
  never leaves a scale half applied. The next scale takes the next generation number.
- ``stopped``: a receiving ``processor`` of ``generation`` stopped on its own (history lost to
  retention, a failed Spark job) with a ``reason`` and where (``at``: the failing record, or
  the whole processor); shown by ``status`` until a ``resumed`` ends it (format 2; in a format-1
  log, until that processor writes its next handoff event) or the scale ends. While a receiver
  is stopped its sources hold their releases. A ``RELEASE`` to it that comes after the
  stop is ignored (its source decided before it read the stop; the scale notes the record's
  ``request`` id as ``refused``, so its writer knows): the source keeps responsibility, so
  the scale can still be aborted unless another of its handoffs was released already. A
  RELEASE without a ``request`` id (written before they carried one) applies as it did.
- ``resumed``: the stop of receiver ``processor`` in ``generation`` is over
  (``rebalance.control_stops`` says who may write it, and when).
- ``instance``: a run of ``processor`` started (``instance``, a random id); from then on only
  its facts apply (``rebalance.control_stops``).
- ``format``: the log is written in format ``version`` from here on. A reader that knows
  only older formats ignores every later record and says so (``unreadable``): processors
  and commands refuse such a log instead of acting on part of it.
- ``metadata_hash``: the last KIP-1101 group hash the processors acted on.

Each record's shape is checked once, by ``rebalance.control_schema``, before any rule reads
it: a record of a known kind that does not fit its schema is refused (``apply`` raises
``MalformedRecordError``) by every reader at the same record; one of an unknown kind is
ignored and noted (that module says why each).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from rebalance.control_records import (
    AppDefinition,
    Generation,
    Handoff,
    InputGrowth,
    Scale,
    SnapshotRequest,
    abort_record,
    handoff_record,
    history_from_record,
    history_record,
    request_of,
)
from rebalance.control_schema import check_record
from rebalance.control_stops import CONTROL_FORMAT, refuse_writer
from rebalance.linear_hash import bucket
from rebalance.positions import Position
from rebalance.receiver_stops import apply_resumed, apply_stopped
from rebalance.record_checks import shown
from rebalance.scale_records import apply_abort, scale_of
from rebalance.states import HANDOFF_MACHINE, HandoffEvent, HandoffPhase

__all__ = [
    "AppDefinition",
    "ControlState",
    "Generation",
    "Handoff",
    "InputGrowth",
    "Scale",
    "abort_record",
    "handoff_record",
    "history_from_record",
    "history_record",
]


@dataclass(frozen=True)
class ControlState:
    """What the control log says, after applying its records in order."""

    app: AppDefinition | None = None
    generation: Generation | None = None
    scale: Scale | None = None
    growth: InputGrowth | None = None
    metadata_hash: int | None = None
    ignored: tuple[str, ...] = field(default=())
    #: the scales that ended before ``scale``, oldest first (which keys left whom, and when)
    past: tuple[Scale, ...] = field(default=())
    #: the last snapshot an operator asked for
    snapshot_request: SnapshotRequest | None = None
    #: each processor's newest run (``instance_record``)
    instances: Mapping[int, str] = field(default_factory=dict)
    #: the log's format (1: written before format records)
    format: int = 1
    #: a format newer than ``CONTROL_FORMAT`` the log switched to (nothing after it applied)
    unreadable: int | None = None
    #: each growth child's base mark, by ``(topic, partition, its life's start)``: the
    #: first ``growth_base`` record of a life (``framework.runtime.growth_bases``)
    growth_bases: Mapping[tuple[str, int, int], int] = field(default_factory=dict)

    @property
    def processors(self) -> int | None:
        """The processor count in force (the last completed generation's)."""
        return self.generation.processors if self.generation else None

    @property
    def scaling(self) -> Scale | None:
        """The scale in progress, if any."""
        return self.scale if self.scale is not None and not self.scale.ended else None

    @property
    def next_generation(self) -> int | None:
        """The generation number the next scale must carry (an aborted one's is used up)."""
        if self.generation is None:
            return None
        last = self.scale.generation if self.scale is not None else 0
        return max(last, self.generation.generation) + 1

    def apply(self, record: Mapping[str, Any]) -> ControlState:
        """The state after ``record``; a record that does not fit the state, or is of a
        kind this splitstate does not know, is ignored and noted. Raises
        ``MalformedRecordError`` for a record of a known kind that does not fit its schema:
        every reader refuses it the same way (``rebalance.control_schema`` says why)."""
        if self.unreadable is not None:
            return self  # noted once, at the format record
        checked = check_record(record)
        if checked is None:
            return self._ignore(f"unknown record type {shown(record.get('type'))}")
        refused = refuse_writer(checked, self.format, self.instances)
        if refused is not None:
            return self._ignore(refused)
        appliers: dict[str, Callable[[Mapping[str, Any]], ControlState]] = {
            "app": lambda r: self._apply_app(AppDefinition.from_record(r)),
            "generation": lambda r: self._apply_generation(
                Generation(int(r["generation"]), int(r["processors"]))
            ),
            "scale": self._apply_scale,
            "handoff": self._apply_handoff,
            "abort": self._apply_abort,
            "stopped": self._apply_stopped,
            "growth": self._apply_growth,
            "growth_done": self._apply_growth_done,
            "growth_base": self._apply_growth_base,
            "metadata_hash": lambda r: replace(self, metadata_hash=int(r["hash"])),
            "snapshot": lambda r: replace(self, snapshot_request=SnapshotRequest.from_record(r)),
            "instance": lambda r: replace(
                self, instances={**self.instances, int(r["processor"]): str(r["instance"])}
            ),
            "resumed": self._apply_resumed,
            "format": self._apply_format,
        }
        return appliers[checked["type"]](checked)

    # -- ownership -------------------------------------------------------------------------

    def owned(self, processor: int, partitions: Mapping[str, int]) -> set[Position]:
        """The input partitions ``processor`` processes (with output) right now.

        ``partitions``: each input topic's current partition count.
        """
        if self.app is None or self.generation is None:
            return set()
        b, p = self.app.initial_processors, self.generation.processors
        owned = {
            (topic, partition)
            for topic, count in partitions.items()
            for partition in range(count)
            if bucket(partition, b, p) == processor
        }
        scale = self.scaling
        if scale is not None:
            for handoff in scale.handoffs.values():
                moved = set(handoff.partitions)
                if handoff.source == processor and handoff.phase in (
                    HandoffPhase.RELEASED,
                    HandoffPhase.COMPLETE,
                ):
                    owned -= moved
                if handoff.target == processor and handoff.phase is HandoffPhase.COMPLETE:
                    owned |= moved
        return owned

    def has_work(self, processor: int) -> bool:
        """Whether ``processor`` should run: a member of the generation in force that has not
        released everything in a scale-in, or a processor that joins in the scale in progress.
        """
        if self.generation is None:
            return False
        scale = self.scaling
        if scale is not None and processor < scale.new_processors:
            return True
        if processor >= self.generation.processors:
            return False
        if scale is None:
            return True
        return not all(
            h.phase in (HandoffPhase.RELEASED, HandoffPhase.COMPLETE)
            for h in scale.outgoing(processor)
        )

    # -- transitions -----------------------------------------------------------------------

    def _apply_app(self, definition: AppDefinition) -> ControlState:
        if self.app is None:
            return replace(self, app=definition)
        if definition == self.app:
            return self
        return self._ignore(f"a second app definition {definition} differs from {self.app}")

    def _apply_generation(self, generation: Generation) -> ControlState:
        if self.app is None:
            return self._ignore("a generation before the app definition")
        if generation == self.generation:
            return self
        if self.generation is not None or generation.generation != 0:
            return self._ignore(
                f"generation record {generation.generation}: later generations come from scales"
            )
        if generation.processors < self.app.initial_processors:
            return self._ignore(
                f"generation 0 with {generation.processors} processors, below "
                f"initial_processors {self.app.initial_processors}"
            )
        return replace(self, generation=generation)

    def _apply_scale(self, record: Mapping[str, Any]) -> ControlState:
        if self.app is None or self.generation is None:
            return self._ignore("a scale before the app definition")
        if self.scaling is not None:
            return self._ignore(
                f"a scale while generation {self.scaling.generation} is in progress"
            )
        if self.growth is not None:
            return self._ignore(
                f"a scale while input topic {self.growth.topic!r} grows to "
                f"{self.growth.partitions} partitions"
            )
        number = int(record["generation"])
        if number != self.next_generation:
            return self._ignore(
                f"scale to generation {number}; generation {self.next_generation} was expected"
            )
        scale = scale_of(self.app, self.generation.processors, number, record)
        if isinstance(scale, str):
            return self._ignore(scale)
        past = self.past if self.scale is None else (*self.past, self.scale)
        return replace(self, scale=scale, past=past)

    def _apply_growth(self, record: Mapping[str, Any]) -> ControlState:
        growth = InputGrowth(str(record["topic"]), int(record["partitions"]), request_of(record))
        if self.scaling is not None:
            return self._ignore(
                f"a growth of {growth.topic!r} while generation {self.scaling.generation} is "
                "in progress"
            )
        current = self.growth
        if current is None:
            return replace(self, growth=growth)
        if (current.topic, current.partitions) == (growth.topic, growth.partitions):
            return self  # the same expand, run again: it resumes the growth in progress
        return self._ignore(
            f"a growth of {growth.topic!r} to {growth.partitions} partitions while a growth "
            f"of {current.topic!r} to {current.partitions} partitions is in progress"
        )

    def _apply_growth_done(self, record: Mapping[str, Any]) -> ControlState:
        topic, partitions = str(record["topic"]), int(record["partitions"])
        current, request = self.growth, request_of(record)
        if current is None or (current.topic, current.partitions) != (topic, partitions):
            return self._ignore(
                f"growth_done of {topic!r} to {partitions} partitions, which is not in progress"
            )
        if None not in (request, current.request) and request != current.request:
            return self._ignore(f"growth_done of request {request}, not the one in progress")
        return replace(self, growth=None)

    def _apply_growth_base(self, record: Mapping[str, Any]) -> ControlState:
        life = (str(record["topic"]), int(record["partition"]), int(record["start"]))
        if life in self.growth_bases:
            return self  # (the first record of a life applies)
        return replace(self, growth_bases={**self.growth_bases, life: int(record["base"])})

    def _apply_handoff(self, record: Mapping[str, Any]) -> ControlState:
        scale = self.scaling
        number = int(record["generation"])
        if scale is None or scale.generation != number:
            return self._ignore(f"a handoff event of generation {number}, which is not in progress")
        pair = (int(record["source"]), int(record["target"]))
        handoff = scale.handoffs.get(pair)
        if handoff is None:
            return self._ignore(f"generation {number} has no handoff {pair[0]} -> {pair[1]}")
        event = HandoffEvent(record["event"])  # (the schema knows every event)
        if not HANDOFF_MACHINE.can_apply(handoff.phase, event):
            return self._ignore(
                f"handoff {pair[0]} -> {pair[1]} of generation {number}: event {event.value} "
                f"is not allowed in phase {handoff.phase.value}"
            )
        released = handoff.released
        if event is HandoffEvent.RELEASE:
            refused = self._refuse_release(scale, handoff, record)
            if refused is not None:
                return refused
            released = {(str(t), int(p)): int(o) for t, p, o in record["offsets"]}
        updated = replace(
            handoff, phase=HANDOFF_MACHINE.apply(handoff.phase, event), released=released
        )
        stopped = scale.stopped
        if self.format < 2:  # then any event of a stopped receiver ended its stop
            stopped = {j: why for j, why in scale.stopped.items() if j != handoff.target}
        new_scale = replace(scale, handoffs={**scale.handoffs, pair: updated}, stopped=stopped)
        state = replace(self, scale=new_scale)
        if new_scale.complete:
            state = replace(state, generation=Generation(number, new_scale.new_processors))
        return state

    def _refuse_release(
        self, scale: Scale, handoff: Handoff, record: Mapping[str, Any]
    ) -> ControlState | None:
        """The state with ``record``, a RELEASE of ``handoff``, ignored, or ``None`` when it
        applies. Ignored when its offsets are not exactly the handoff's partitions, and when
        the receiver stopped first (its source decided before it read the stop: once
        released, the scale could neither finish nor be aborted); then its ``request`` id is
        noted, so that the source takes its partitions back."""
        offsets = {(str(t), int(p)) for t, p, _o in record.get("offsets", [])}
        if offsets != set(handoff.partitions):
            return self._ignore(
                f"handoff {handoff.source} -> {handoff.target}: RELEASE must give the offsets "
                f"of exactly {sorted(handoff.partitions)}"
            )
        request = request_of(record)
        if handoff.target not in scale.stopped or request is None:
            return None  # (written before RELEASEs carried an id: applied, as it was then)
        refused = scale.refused | {request}
        ignored = self._ignore(
            f"handoff {handoff.source} -> {handoff.target} of generation {scale.generation}: "
            f"RELEASE to processor {handoff.target}, which stopped first; the source keeps "
            "its partitions"
        )
        return replace(ignored, scale=replace(scale, refused=refused))

    def _apply_abort(self, record: Mapping[str, Any]) -> ControlState:
        return self._with_scale(apply_abort(self.scaling, record))

    def _apply_stopped(self, record: Mapping[str, Any]) -> ControlState:
        return self._with_scale(apply_stopped(self.scaling, record))

    def _apply_resumed(self, record: Mapping[str, Any]) -> ControlState:
        return self._with_scale(apply_resumed(self.scaling, record))

    def _with_scale(self, outcome: Scale | str) -> ControlState:
        """The state with the scale ``outcome``, or with why a record was ignored."""
        if isinstance(outcome, str):
            return self._ignore(outcome)
        return replace(self, scale=outcome)

    def _apply_format(self, record: Mapping[str, Any]) -> ControlState:
        version = int(record["version"])
        if version > CONTROL_FORMAT:
            ignored = self._ignore(
                f"the control log is written in format {version} from here on, and this "
                f"splitstate reads formats up to {CONTROL_FORMAT}: every later record is "
                "ignored. Fix: upgrade splitstate"
            )
            return replace(ignored, unreadable=version)
        return replace(self, format=max(self.format, version))

    def _ignore(self, reason: str) -> ControlState:
        return replace(self, ignored=(*self.ignored, reason))
