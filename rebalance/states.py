"""Protocol state machines as explicit transition tables (in the manner of Kafka's controller).

Three machines, each a table of ``(state, event) -> state``; anything not in a table is an
invalid transition and raises ``InvalidTransitionError`` naming the state, the event and the events
the state allows. Every reader of the control log applies records through these tables, so all
readers agree on every state.

Processor lifecycle (one per processor id):

====================  ============  =====================================================
state                 event         next state
====================  ============  =====================================================
NEW                   ACTIVATE      ACTIVE (a processor of the first generation)
NEW                   JOIN          JOINING (a scale-out added it; it builds its state)
JOINING               ACTIVATE      ACTIVE (every incoming handoff completed)
JOINING               ABORT         STOPPED (the scale was abandoned before any release)
ACTIVE                LEAVE         LEAVING (a scale-in removes it; it keeps processing)
LEAVING               ABORT         ACTIVE (the scale-in was abandoned before release)
LEAVING               STOP          STOPPED (all its partitions were released)
STOPPED               REJOIN        NEW (a later scale-out adds the id again, from empty)
====================  ============  =====================================================

Handoff (one per generation and (source, target) pair; KIP-287's catch-up protocol):

=============  ================  ============  ===========================================
state          event             next state    meaning
=============  ================  ============  ===========================================
PLANNED        START_BOOTSTRAP   BOOTSTRAPPING  a bulk (Spark) build of the target's state
PLANNED        START_CATCH_UP    CATCHING_UP   replay S2 from the earliest offsets (T2)
BOOTSTRAPPING  BOOTSTRAPPED      CATCHING_UP   state ingested; replay from the covered T2
BOOTSTRAPPING  BOOTSTRAP_FAILED  PLANNED       retry, or fall back to replay
CATCHING_UP    CAUGHT_UP         READY         T1 - T2 under the lag threshold
READY          RELEASE           RELEASED      source stopped at F, committed, flushed
RELEASED       COMPLETE          COMPLETE      target restored T2 -> F and owns S1 from F
PLANNED..READY ABORT             ABORTED       abandoned; the source kept responsibility
=============  ================  ============  ===========================================

Partition lifecycle (KIP-253; one per input partition):

===================  =================  ===================  ==============================
state                event              next state           meaning
===================  =================  ===================  ==============================
NON_EXISTENT         CREATE_INITIAL     ONLINE               one of the first N partitions
NON_EXISTENT         CREATE             NEW                  created by a growth; blocked
NEW                  SET_THRESHOLD      BLOCKED_BY_PARENT    marker written to the parent
BLOCKED_BY_PARENT    UNBLOCK            ONLINE               group passed parent's threshold
ONLINE               MARK_FOR_DELETION  MARKED_FOR_DELETION  no new records placed here
MARKED_FOR_DELETION  UNMARK             ONLINE               shrink abandoned
MARKED_FOR_DELETION  DRAINED            DELETED              consumed to its end, removed
DELETED              CREATE             NEW                  the id is grown again later
===================  =================  ===================  ==============================
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Generic, TypeVar

__all__ = [
    "HANDOFF_MACHINE",
    "PARTITION_MACHINE",
    "PROCESSOR_MACHINE",
    "HandoffEvent",
    "HandoffPhase",
    "InvalidTransitionError",
    "PartitionEvent",
    "PartitionState",
    "ProcessorEvent",
    "ProcessorPhase",
    "StateMachine",
]

S = TypeVar("S", bound=StrEnum)
E = TypeVar("E", bound=StrEnum)


class InvalidTransitionError(ValueError):
    """An event that the current state does not allow."""

    def __init__(self, machine: str, state: StrEnum, event: StrEnum, allowed: list[str]) -> None:
        self.machine, self.state, self.event, self.allowed = machine, state, event, allowed
        allowed_text = ", ".join(allowed) if allowed else "none (final state)"
        super().__init__(
            f"{machine}: event {event.value} is not allowed in state {state.value}; "
            f"allowed events: {allowed_text}"
        )


class StateMachine(Generic[S, E]):
    """A transition table with a name; ``apply`` gives the next state or raises."""

    def __init__(self, name: str, table: Mapping[tuple[S, E], S]) -> None:
        self.name = name
        self.table = dict(table)

    def allowed(self, state: S) -> list[str]:
        """The events ``state`` accepts, in table order."""
        return [event.value for (source, event) in self.table if source == state]

    def can_apply(self, state: S, event: E) -> bool:
        """Whether ``event`` is valid in ``state``."""
        return (state, event) in self.table

    def apply(self, state: S, event: E) -> S:
        """The state after ``event``; ``InvalidTransitionError`` when the table has no such row."""
        try:
            return self.table[(state, event)]
        except KeyError:
            raise InvalidTransitionError(self.name, state, event, self.allowed(state)) from None


class ProcessorPhase(StrEnum):
    """Where a processor is in its life."""

    NEW = "NEW"
    JOINING = "JOINING"
    ACTIVE = "ACTIVE"
    LEAVING = "LEAVING"
    STOPPED = "STOPPED"


class ProcessorEvent(StrEnum):
    """What moves a processor between phases."""

    ACTIVATE = "ACTIVATE"
    JOIN = "JOIN"
    ABORT = "ABORT"
    LEAVE = "LEAVE"
    STOP = "STOP"
    REJOIN = "REJOIN"


class HandoffPhase(StrEnum):
    """Where one (source -> target) handoff of a scale generation is."""

    PLANNED = "PLANNED"
    BOOTSTRAPPING = "BOOTSTRAPPING"
    CATCHING_UP = "CATCHING_UP"
    READY = "READY"
    RELEASED = "RELEASED"
    COMPLETE = "COMPLETE"
    ABORTED = "ABORTED"


class HandoffEvent(StrEnum):
    """What moves a handoff between phases."""

    START_BOOTSTRAP = "START_BOOTSTRAP"
    BOOTSTRAPPED = "BOOTSTRAPPED"
    BOOTSTRAP_FAILED = "BOOTSTRAP_FAILED"
    START_CATCH_UP = "START_CATCH_UP"
    CAUGHT_UP = "CAUGHT_UP"
    RELEASE = "RELEASE"
    COMPLETE = "COMPLETE"
    ABORT = "ABORT"


class PartitionState(StrEnum):
    """Where an input partition is in its life (expansion and deletion, KIP-253)."""

    NON_EXISTENT = "NonExistent"
    NEW = "New"
    BLOCKED_BY_PARENT = "BlockedByParent"
    ONLINE = "Online"
    MARKED_FOR_DELETION = "MarkedForDeletion"
    DELETED = "Deleted"


class PartitionEvent(StrEnum):
    """What moves a partition between states."""

    CREATE_INITIAL = "CREATE_INITIAL"
    CREATE = "CREATE"
    SET_THRESHOLD = "SET_THRESHOLD"
    UNBLOCK = "UNBLOCK"
    MARK_FOR_DELETION = "MARK_FOR_DELETION"
    UNMARK = "UNMARK"
    DRAINED = "DRAINED"


_P, _PE = ProcessorPhase, ProcessorEvent
PROCESSOR_MACHINE: StateMachine[ProcessorPhase, ProcessorEvent] = StateMachine(
    "processor",
    {
        (_P.NEW, _PE.ACTIVATE): _P.ACTIVE,
        (_P.NEW, _PE.JOIN): _P.JOINING,
        (_P.JOINING, _PE.ACTIVATE): _P.ACTIVE,
        (_P.JOINING, _PE.ABORT): _P.STOPPED,
        (_P.ACTIVE, _PE.LEAVE): _P.LEAVING,
        (_P.LEAVING, _PE.ABORT): _P.ACTIVE,
        (_P.LEAVING, _PE.STOP): _P.STOPPED,
        (_P.STOPPED, _PE.REJOIN): _P.NEW,
    },
)

_H, _HE = HandoffPhase, HandoffEvent
HANDOFF_MACHINE: StateMachine[HandoffPhase, HandoffEvent] = StateMachine(
    "handoff",
    {
        (_H.PLANNED, _HE.START_BOOTSTRAP): _H.BOOTSTRAPPING,
        (_H.PLANNED, _HE.START_CATCH_UP): _H.CATCHING_UP,
        (_H.BOOTSTRAPPING, _HE.BOOTSTRAPPED): _H.CATCHING_UP,
        (_H.BOOTSTRAPPING, _HE.BOOTSTRAP_FAILED): _H.PLANNED,
        (_H.CATCHING_UP, _HE.CAUGHT_UP): _H.READY,
        (_H.READY, _HE.RELEASE): _H.RELEASED,
        (_H.RELEASED, _HE.COMPLETE): _H.COMPLETE,
        (_H.PLANNED, _HE.ABORT): _H.ABORTED,
        (_H.BOOTSTRAPPING, _HE.ABORT): _H.ABORTED,
        (_H.CATCHING_UP, _HE.ABORT): _H.ABORTED,
        (_H.READY, _HE.ABORT): _H.ABORTED,
    },
)

_S, _SE = PartitionState, PartitionEvent
PARTITION_MACHINE: StateMachine[PartitionState, PartitionEvent] = StateMachine(
    "partition",
    {
        (_S.NON_EXISTENT, _SE.CREATE_INITIAL): _S.ONLINE,
        (_S.NON_EXISTENT, _SE.CREATE): _S.NEW,
        (_S.NEW, _SE.SET_THRESHOLD): _S.BLOCKED_BY_PARENT,
        (_S.BLOCKED_BY_PARENT, _SE.UNBLOCK): _S.ONLINE,
        (_S.ONLINE, _SE.MARK_FOR_DELETION): _S.MARKED_FOR_DELETION,
        (_S.MARKED_FOR_DELETION, _SE.UNMARK): _S.ONLINE,
        (_S.MARKED_FOR_DELETION, _SE.DRAINED): _S.DELETED,
        (_S.DELETED, _SE.CREATE): _S.NEW,
    },
)
