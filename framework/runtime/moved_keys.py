"""Forgetting the state of keys a processor no longer owns after a scale, between batches.

Two cases, both read from the control log (never acted on before the log says so):

- an old owner whose handoff is RELEASED deletes the keys it gave to the receiver; only the
  log's RELEASED counts (a RELEASE it wrote may still lose to an ``abort`` written before it,
  and then it keeps the partitions and their keys);
- a receiver of an aborted scale deletes what it had rebuilt of the keys it would have gained.

Each is a ``KeyPurge`` registered in the processor's own database, so a crash resumes it and a
later control log (a newer scale) does not make it forgotten. Stored keys are ordered by bucket,
so a purge is a few range deletes (one atomic write, reading no key): it costs the same whether
the processor holds a thousand keys or a billion. Before a processor starts rebuilding keys in
a new catch-up, every purge still pending finishes, so an old purge never deletes keys rebuilt
since.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from rebalance import HandoffPhase
from rebalance.control import ControlState, Scale
from rebalance.key_ranges import KeyRange, handoff_ranges, subtract
from statestore import KeyPurge, ProcessorDatabase, pending_purges, start_purge

__all__ = ["MovedKeys", "doomed_ranges"]

log = logging.getLogger(__name__)
_GONE = (HandoffPhase.RELEASED, HandoffPhase.COMPLETE)


def doomed_ranges(spec: Mapping[str, Any]) -> list[KeyRange]:
    """The key ranges of a purge: keys owned by ``target`` at ``new`` processors whose owner
    at ``old`` is a source, less the keys of ``kept``: keys this processor received again in a
    later scale (its catch-up rebuilt them; they are its own again)."""
    b = int(spec["b"])

    def ranges(part: Mapping[str, Any]) -> list[KeyRange]:
        sources = [int(s) for s in part["sources"]]
        return handoff_ranges(b, int(part["old"]), int(part["new"]), int(part["target"]), sources)

    kept = [r for part in spec.get("kept", []) for r in ranges(part)]
    return subtract(ranges(spec), kept)


class MovedKeys:
    """The purges of one processor's database, registered from the control state."""

    def __init__(self, processor: int, database: ProcessorDatabase) -> None:
        self.processor = processor
        self._database = database
        self._active = {
            name: KeyPurge(database, name, int(spec["b"]), doomed_ranges(spec))
            for name, spec in pending_purges(database).items()
        }

    @property
    def pending(self) -> bool:
        """Whether any purge is still running."""
        return bool(self._active)

    def sync(self, state: ControlState) -> None:
        """Register the purges the control state calls for (each once).

        Every scale in the log's history counts (a processor that was down may find several
        ended since). A purge keeps the keys this processor received again in a later scale:
        that catch-up cleared and rebuilt them, and they are its own again.
        """
        if state.app is None or state.scale is None:
            return
        me, b = self.processor, state.app.initial_processors
        scales = [*state.past, state.scale]
        wanted: dict[str, dict[str, Any]] = {}
        for scale in scales:
            kept = [
                {
                    "old": later.old_processors,
                    "new": later.new_processors,
                    "target": me,
                    "sources": sorted(h.source for h in later.incoming(me)),
                }
                for later in scales
                if later.generation > scale.generation and later.incoming(me)
            ]
            for name, spec in self._purges(b, scale).items():
                wanted[name] = {**spec, "kept": kept} if kept else spec
        for name, spec in wanted.items():
            if start_purge(self._database, name, spec):
                self._active[name] = KeyPurge(
                    self._database, name, int(spec["b"]), doomed_ranges(spec)
                )
                log.info("processor %d: deleting the state of keys it gave away (%s)", me, name)

    def _purges(self, b: int, scale: Scale) -> dict[str, dict[str, Any]]:
        """The purges ``scale`` calls for here: keys handed away, or rebuilt for nothing."""
        me, g = self.processor, scale.generation
        base = {"b": b, "old": scale.old_processors, "new": scale.new_processors}
        wanted: dict[str, dict[str, Any]] = {}
        for handoff in scale.outgoing(me):
            if handoff.phase in _GONE:
                name = f"moved-{g}-{me}-{handoff.target}"
                wanted[name] = {**base, "target": handoff.target, "sources": [me]}
        if scale.aborted is not None and scale.incoming(me):
            sources = sorted(h.source for h in scale.incoming(me))
            wanted[f"aborted-{g}-{me}"] = {**base, "target": me, "sources": sources}
        return wanted

    def step(self) -> None:
        """Run the first pending purge (a few range deletes: one write, no key read)."""
        for name, purge in list(self._active.items()):
            purge.step()
            del self._active[name]
            log.info(
                "processor %d: %s done (%d key ranges)", self.processor, name, len(purge.ranges)
            )
            return

    def finish(self) -> None:
        """Run every pending purge (before rebuilding keys in a catch-up)."""
        while self._active:
            self.step()
