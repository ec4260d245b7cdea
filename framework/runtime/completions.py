"""What a processor's database knows of the handoffs into it: which it completed itself, and
clearing the keys of those another instance of the processor completed.

A receiver's catch-up builds the keys it gains in its own database, and ``CatchUp.complete``
notes the handoff as completed *here* (a flag, in the same write as the offsets F). The
control log may say a handoff into this processor is COMPLETE although this database did not
complete it: another instance did (a second copy on another machine, or this directory was
stopped while another took over, and is started again now). What this database holds for
those keys is then not their state -- part of a catch-up, or keys left from an earlier
ownership -- and their input offsets here are stale. Before the processor reads those
partitions, ``Completions.settle`` deletes those keys and offsets in one write, with a flag
saying so; the partitions are then rebuilt from the input like a lost state directory
(``framework.runtime.assignment``), never on top of what was there.

A database opened for the first time by a splitstate that tracks completions (one written
before) has no flags for what it completed earlier: it tracks the handoffs of scales after
the newest one the control log had then (a new, empty database: every scale).

Once a scale ended, its catch-up's bookkeeping (progress, bulk-build marks, crash attempts)
is deleted here too; the completion flags stay.
"""

from __future__ import annotations

import logging

from rebalance import HandoffPhase
from rebalance.control import ControlState, Handoff, Scale
from rebalance.key_ranges import handoff_ranges
from statestore import ProcessorDatabase
from statestore.layout import CRASH_CATCHUP_ATTEMPT_PREFIX, flag_key, offset_prefix

__all__ = ["Completions", "completed_flag"]

log = logging.getLogger("framework.runtime.loop")
_TRACKED_FROM = "handoffs-tracked-from"


def completed_flag(generation: int, source: int) -> str:
    """The flag of a handoff from ``source`` in ``generation`` completed in this database."""
    return f"handoff-{generation}-from-{source}-completed"


def _settled_flag(generation: int, source: int) -> str:
    return f"handoff-{generation}-from-{source}-settled"


def _tidied_flag(generation: int) -> str:
    return f"catchup-{generation}-tidied"


class Completions:
    """The handoffs into processor ``processor`` that its database ``database`` completed."""

    def __init__(self, processor: int, database: ProcessorDatabase, state: ControlState) -> None:
        self.processor = processor
        self._database = database
        tracked = database.note(_TRACKED_FROM)
        if tracked is None:
            newest = 0 if state.scale is None else state.scale.generation
            tracked = str(0 if database.created or database.fresh else newest + 1)
            database.set_note(_TRACKED_FROM, tracked)
        #: scales of this generation and later are tracked
        self.tracked_from = int(tracked)
        self._seen: ControlState | None = None
        #: handoffs ``(generation, source)`` known completed or settled here, and
        #: generations known tidied (not to read their flags again at every change)
        self._done: set[tuple[int, int]] = set()
        self._tidied: set[int] = set()

    def settle(self, state: ControlState) -> list[Handoff]:
        """Clear the keys and offsets of every handoff into this processor that the log says
        is COMPLETE and this database did not complete (once each); tidy ended catch-ups.
        Returns the handoffs it cleared."""
        if state is self._seen or state.app is None or state.scale is None:
            return []
        self._seen = state
        initial = state.app.initial_processors
        cleared: list[Handoff] = []
        for scale in (*state.past, state.scale):
            if scale.generation < self.tracked_from:
                continue
            for handoff in scale.incoming(self.processor):
                if handoff.phase is HandoffPhase.COMPLETE and self._elsewhere(scale, handoff):
                    self._clear(initial, scale, handoff)
                    cleared.append(handoff)
            if scale.ended:
                self._tidy(scale.generation)
        return cleared

    def _elsewhere(self, scale: Scale, handoff: Handoff) -> bool:
        key = (scale.generation, handoff.source)
        if key in self._done:
            return False
        has = self._database.has_flag
        self._done.add(key)  # it is, or is settled right away
        return not has(completed_flag(*key)) and not has(_settled_flag(*key))

    def _clear(self, initial: int, scale: Scale, handoff: Handoff) -> None:
        g, me = scale.generation, self.processor
        ranges = handoff_ranges(
            initial, scale.old_processors, scale.new_processors, me, [handoff.source]
        )
        self._database.delete_ranges(
            initial,
            ranges,
            [(flag_key(_settled_flag(g, handoff.source)), b"1")],
            forget=handoff.partitions,
        )
        log.warning(
            "processor %d: another instance of it completed handoff %d -> %d of generation %d; "
            "what this state directory held for those keys (%s) is deleted, and they are "
            "rebuilt from the input without output",
            me,
            handoff.source,
            me,
            g,
            sorted(f"{t}[{p}]" for t, p in handoff.partitions),
        )

    def _tidy(self, generation: int) -> None:
        """Delete the bookkeeping of generation ``generation``'s catch-up (it ended)."""
        if generation in self._tidied:
            return
        self._tidied.add(generation)
        if self._database.has_flag(_tidied_flag(generation)):
            return
        scope = f"catchup-{generation}"
        self._database.delete_meta(
            [offset_prefix(scope), f"progress/{scope}-from-".encode(), flag_key(f"{scope}-")],
            [CRASH_CATCHUP_ATTEMPT_PREFIX + scope.encode()],
        )
        batch = self._database.begin()
        batch.set_flag(_tidied_flag(generation))
        batch.commit()
