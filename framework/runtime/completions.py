"""What a processor's state directory knows of the handoffs into it: which it completed
itself, and whether it missed one another run of the processor completed.

A receiver's catch-up builds the keys it gains in its own database, and ``CatchUp.complete``
notes the handoff as held *here* (a flag, in the same write as the offsets F). The
control log may say a handoff into this processor is COMPLETE although this directory did
not complete it: another run did (a second copy on another machine, or this directory was
stopped while another run took over, and is started again now). The directory then does not
hold those keys' state -- part of a catch-up, or keys left from an earlier ownership -- and
its other partitions may be behind what that run processed since. Such a directory is
*stale*: the runtime replaces it as a lost one (``framework.runtime.loop``: moved aside, then
restored from the processor's newest snapshot, else rebuilt from the input), never rebuilding
on top of what was there. Rebuilding only the moved partitions would miss the gained keys'
earlier records in an ancestor partition this directory already owns (a scale-in after a
growth).

Which scales are tracked: a directory notes, when first opened by a splitstate that tracks
completions, from which generation on it does: the scale in progress then, else the next one.
A new (or lost, re-created) directory holds nothing, so nothing before is stale; a directory
of an older splitstate has no flags for what it completed before.

Once a scale ended, its catch-up's bookkeeping (progress, bulk-build marks, crash attempts)
is deleted here (``tidy``); the completion flags stay.
"""

from __future__ import annotations

from collections.abc import Mapping

from framework.errors import SplitstateError
from framework.input_times import ORDER_SCOPE
from rebalance import HandoffPhase
from rebalance.control import ControlState, Handoff
from rebalance.positions import Position
from statestore import ProcessorDatabase, StateBatch
from statestore.layout import CRASH_CATCHUP_ATTEMPT_PREFIX, flag_key, offset_prefix
from statestore.meta import delete_meta

__all__ = ["Completions", "StaleDirectoryError", "complete_offsets", "holds_flag"]

_TRACKED_FROM = "handoffs-tracked-from"


def complete_offsets(
    database: ProcessorDatabase,
    batch: StateBatch,
    finals: Mapping[Position, int],
    *,
    marks: Mapping[Position, int] | None = None,
) -> None:
    """Set the offsets F (``finals``) of a completed handoff's partitions with ``batch``. Of
    an app in the canonical input order, ``marks``: the catch-up's marks at its progress,
    which is F: each partition's mark at F is handed to the live order (``ORDER_SCOPE``),
    so the live loop goes on with the marks the catch-up read; one without a mark there
    (nothing read: F is its start) has none (a mark stored when it was read here before,
    at another offset, is not its mark at F). Another app's completion writes the offsets
    only."""
    for (topic, partition), final in finals.items():
        batch.set_offset(topic, partition, final)
        if marks is None:
            continue
        mark = marks.get((topic, partition))
        if mark is not None:
            batch.set_progress(ORDER_SCOPE, topic, partition, mark)
        else:
            batch.clear_progress(ORDER_SCOPE, topic, partition)


def holds_flag(generation: int, source: int) -> str:
    """The flag saying this database holds the keys of the handoff from ``source`` in
    ``generation``: it completed it, or was created (or replaced) after it."""
    return f"handoff-{generation}-from-{source}-held"


class StaleDirectoryError(SplitstateError):
    """The state directory missed a handoff another run of the processor completed: the run
    exits, and the next start replaces the directory (``framework.runtime.state_dir``)."""


def _tidied_flag(generation: int) -> str:
    return f"catchup-{generation}-tidied"


class Completions:
    """The handoffs into processor ``processor`` that its database ``database`` completed
    (``state``: the control state when the database was opened)."""

    def __init__(self, processor: int, database: ProcessorDatabase, state: ControlState) -> None:
        self.processor = processor
        self._database = database
        tracked = database.note(_TRACKED_FROM)
        if tracked is None:
            scale = state.scale
            start = 0 if scale is None else scale.generation + (1 if scale.ended else 0)
            tracked = str(start)
            database.set_note(_TRACKED_FROM, tracked)
        #: scales of this generation and later are tracked
        self.tracked_from = int(tracked)
        #: generations known tidied, handoffs ``(generation, source)`` known held (not to
        #: read their flags again at every change of the control state)
        self._tidied: set[int] = set()
        self._held: set[tuple[int, int]] = set()

    def missed(self, state: ControlState) -> list[tuple[int, Handoff]]:
        """The handoffs ``(generation, handoff)`` into this processor the log says are
        COMPLETE and this directory did not complete (tracked scales only)."""
        if state.scale is None:
            return []
        missed = []
        for scale in (*state.past, state.scale):
            if scale.generation < self.tracked_from:
                continue
            for handoff in scale.incoming(self.processor):
                key = (scale.generation, handoff.source)
                if handoff.phase is not HandoffPhase.COMPLETE or key in self._held:
                    continue
                if self._database.has_flag(holds_flag(*key)):
                    self._held.add(key)
                else:
                    missed.append((scale.generation, handoff))
        return missed

    def mark(self, missed: list[tuple[int, Handoff]]) -> None:
        """Note ``missed`` handoffs as held here: only for a directory that holds nothing of
        their keys (new, or just replaced), so that they are not missed again."""
        if not missed:
            return
        batch = self._database.begin()
        for generation, handoff in missed:
            batch.set_flag(holds_flag(generation, handoff.source))
        batch.commit()

    def tidy(self, state: ControlState) -> None:
        """Delete the catch-up bookkeeping of every scale that ended (once each)."""
        if state.scale is None:
            return
        for scale in (*state.past, state.scale):
            if scale.ended and scale.generation not in self._tidied:
                self._tidy(scale.generation)

    def _tidy(self, generation: int) -> None:
        self._tidied.add(generation)
        if self._database.has_flag(_tidied_flag(generation)):
            return
        scope = f"catchup-{generation}"
        delete_meta(
            self._database.backend,
            [
                offset_prefix(scope),
                offset_prefix(f"{scope}-mark"),
                f"progress/{scope}-from-".encode(),
                flag_key(f"{scope}-"),
            ],
            [CRASH_CATCHUP_ATTEMPT_PREFIX + scope.encode()],
        )
        batch = self._database.begin()
        batch.set_flag(_tidied_flag(generation))
        batch.commit()
