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

__all__ = ["PURGE_STEP_KEYS", "MovedKeys"]

log = logging.getLogger(__name__)
_GONE = (HandoffPhase.RELEASED, HandoffPhase.COMPLETE)

#: keys a purge deletes per step of the loop (one step between two batches), so that deleting
#: many keys never holds the loop up
PURGE_STEP_KEYS = 5_000


def _doomed(spec: Mapping[str, Any]) -> Callable[[bytes], bool]:
    """Keys owned by ``target`` at ``new`` processors whose owner at ``old`` is a source,
    less the keys of ``kept``: keys this processor received again in a later scale (its
    catch-up rebuilt them; they are its own again)."""
    b, old, new, target = int(spec["b"]), int(spec["old"]), int(spec["new"]), int(spec["target"])
    sources = frozenset(int(s) for s in spec["sources"])
    kept = [
        (int(k["old"]), int(k["new"]), int(k["target"]), frozenset(int(s) for s in k["sources"]))
        for k in spec.get("kept", [])
    ]

    def doomed(key: bytes) -> bool:
        h = key_hash(key)
        if bucket(h, b, new) != target or bucket(h, b, old) not in sources:
            return False
        return not any(bucket(h, b, n) == t and bucket(h, b, o) in s for o, n, t, s in kept)

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

    def step(self, budget: int | None = None) -> None:
        """One bounded step of the first pending purge (``PURGE_STEP_KEYS`` keys at most)."""
        for name, purge in list(self._active.items()):
            if purge.step(PURGE_STEP_KEYS if budget is None else budget):
                del self._active[name]
                log.info(
                    "processor %d: %s done, %d keys deleted", self.processor, name, purge.deleted
                )
            return

    def finish(self) -> None:
        """Run every pending purge to its end (before rebuilding keys in a catch-up)."""
        while self._active:
            self.step(50_000)
