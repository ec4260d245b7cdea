"""Forgetting the state of keys a processor no longer owns after a scale, between batches.

Two cases, both read from the control log (never acted on before the log says so):

- an old owner whose handoff is RELEASED deletes the keys it gave to the receiver; only the
  log's RELEASED counts (a RELEASE it wrote may still lose to an ``abort`` written before it,
  and then it keeps the partitions and their keys);
- a receiver of an aborted scale deletes what it had rebuilt of the keys it would have gained.

Each is a ``KeyPurge`` registered in the processor's own database, so a crash resumes it and a
later control log (a newer scale) does not make it forgotten. Steps are bounded so the other
partitions keep flowing. Before a processor starts rebuilding keys in a new catch-up, every
purge still pending finishes, so an old purge never deletes keys rebuilt since.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from rebalance import HandoffPhase, bucket, key_hash
from rebalance.control import ControlState, Scale
from statestore import KeyPurge, ProcessorDatabase, pending_purges, start_purge

__all__ = ["MovedKeys"]

log = logging.getLogger(__name__)
_GONE = (HandoffPhase.RELEASED, HandoffPhase.COMPLETE)


def _doomed(spec: Mapping[str, Any]) -> Callable[[bytes], bool]:
    """Keys owned by ``target`` at ``new`` processors whose owner at ``old`` is a source."""
    b, old, new, target = int(spec["b"]), int(spec["old"]), int(spec["new"]), int(spec["target"])
    sources = frozenset(int(s) for s in spec["sources"])

    def doomed(key: bytes) -> bool:
        h = key_hash(key)
        return bucket(h, b, new) == target and bucket(h, b, old) in sources

    return doomed


class MovedKeys:
    """The purges of one processor's database, registered from the control state."""

    def __init__(self, processor: int, database: ProcessorDatabase) -> None:
        self.processor = processor
        self._database = database
        self._active = {
            name: KeyPurge(database, name, _doomed(spec))
            for name, spec in pending_purges(database).items()
        }

    @property
    def pending(self) -> bool:
        """Whether any purge is still running."""
        return bool(self._active)

    def sync(self, state: ControlState) -> None:
        """Register the purges the control state calls for (each once).

        Every scale in the log's history counts (a processor that was down may find several
        ended since), except scales before the last one this processor received keys in: its
        catch-up then cleared what it gained, and an older purge could delete keys it owns
        again.
        """
        if state.app is None or state.scale is None:
            return
        me, b = self.processor, state.app.initial_processors
        scales = [*state.past, state.scale]
        received = [s.generation for s in scales if s.incoming(me)]
        wanted: dict[str, dict[str, Any]] = {}
        for scale in scales:
            later = [g for g in received if g > scale.generation]
            if not later:
                wanted.update(self._purges(b, scale))
        for name, spec in wanted.items():
            if start_purge(self._database, name, spec):
                self._active[name] = KeyPurge(self._database, name, _doomed(spec))
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

    def step(self, budget: int = 5_000) -> None:
        """One bounded step of the first pending purge."""
        for name, purge in list(self._active.items()):
            if purge.step(budget):
                del self._active[name]
                log.info(
                    "processor %d: %s done, %d keys deleted", self.processor, name, purge.deleted
                )
            return

    def finish(self) -> None:
        """Run every pending purge to its end (before rebuilding keys in a catch-up)."""
        while self._active:
            self.step(50_000)
