"""The handoff state machine as an explicit transition table (in the manner of Kafka's controller).

A table of ``(state, event) -> state``; anything not in it is an invalid transition and raises
``InvalidTransitionError`` naming the state, the event and the events the state allows. Every
reader of the control log applies handoff records through this table, so all readers agree on
every handoff's state.

Handoff (one per generation and (source, target) pair; KIP-287's catch-up protocol):

=============  ================  ============  ===========================================
state          event             next state    meaning
=============  ================  ============  ===========================================
PLANNED        START_CATCH_UP    CATCHING_UP   replay S2 from the earliest offsets (T2),
                                               after a Spark bootstrap with ``bootstrap: spark``
CATCHING_UP    CAUGHT_UP         READY         T1 - T2 under the lag threshold
READY          RELEASE           RELEASED      source stopped at F, committed, flushed
RELEASED       COMPLETE          COMPLETE      target restored T2 -> F and owns S1 from F
PLANNED..READY ABORT             ABORTED       abandoned; the source kept responsibility
=============  ================  ============  ===========================================
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Generic, TypeVar

__all__ = [
    "HANDOFF_MACHINE",
    "HandoffEvent",
    "HandoffPhase",
    "InvalidTransitionError",
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


class HandoffPhase(StrEnum):
    """Where one (source -> target) handoff of a scale generation is."""

    PLANNED = "PLANNED"
    CATCHING_UP = "CATCHING_UP"
    READY = "READY"
    RELEASED = "RELEASED"
    COMPLETE = "COMPLETE"
    ABORTED = "ABORTED"


class HandoffEvent(StrEnum):
    """What moves a handoff between phases."""

    START_CATCH_UP = "START_CATCH_UP"
    CAUGHT_UP = "CAUGHT_UP"
    RELEASE = "RELEASE"
    COMPLETE = "COMPLETE"
    ABORT = "ABORT"


_H, _HE = HandoffPhase, HandoffEvent
HANDOFF_MACHINE: StateMachine[HandoffPhase, HandoffEvent] = StateMachine(
    "handoff",
    {
        (_H.PLANNED, _HE.START_CATCH_UP): _H.CATCHING_UP,
        (_H.CATCHING_UP, _HE.CAUGHT_UP): _H.READY,
        (_H.READY, _HE.RELEASE): _H.RELEASED,
        (_H.RELEASED, _HE.COMPLETE): _H.COMPLETE,
        (_H.PLANNED, _HE.ABORT): _H.ABORTED,
        (_H.CATCHING_UP, _HE.ABORT): _H.ABORTED,
        (_H.READY, _HE.ABORT): _H.ABORTED,
    },
)
