"""Opening a processor's state directory for a run: restored from the newest snapshot when it
was lost, and replaced when it is stale.

A directory is *stale* when the control log says a handoff into the processor is COMPLETE
and the directory did not complete it (``Completions.missed``): another run of the
processor took over meanwhile. Its state is then not the processor's -- part of a catch-up,
keys from an earlier ownership, partitions behind what the other run processed -- so it is
moved aside (``discard``; by default renamed ``<name>.stale-<ms>``, kept for a person to look
at) and the processor starts as after a lost directory: from its newest snapshot (taken by
the run that completed the handoff) when snapshots are on, else rebuilding from the input.
A new directory holds nothing of those handoffs' keys: it notes them as held.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from framework.clock import Clock
from framework.config import AppConfig
from framework.runtime.completions import Completions
from framework.snapshots.restore import restore_lost_state
from rebalance.control import ControlState
from rebalance.positions import Position
from statestore import DatabaseIdentity, ProcessorDatabase, StoreSpec

__all__ = ["DatabaseOpener", "StateDirectory", "move_aside"]

log = logging.getLogger("framework.runtime.loop")

#: Opens (or creates) a processor's database at a path, as ``ProcessorDatabase.open`` does.
DatabaseOpener = Callable[[Path, DatabaseIdentity, Sequence[StoreSpec]], ProcessorDatabase]


def move_aside(clock: Clock) -> Callable[[Path], None]:
    """Discard a state directory by renaming it ``<name>.stale-<ms>`` (nothing is deleted)."""

    def discard(path: Path) -> None:
        if path.exists():
            path.rename(path.with_name(f"{path.name}.stale-{int(clock.time() * 1000)}"))

    return discard


class StateDirectory:
    """How one run opens processor ``identity.processor``'s state directory ``path``.

    ``restore``: whether a lost directory is restored from snapshots (``owned``: what the
    processor owns now; ``epoch``: the control log's); ``holds_state``: whether a directory
    holds anything; ``progress``: called while a restore copies (the run's heartbeat)."""

    def __init__(
        self,
        config: AppConfig,
        identity: DatabaseIdentity,
        path: Path,
        *,
        open_database: DatabaseOpener,
        stores: Sequence[StoreSpec],
        discard: Callable[[Path], None],
        restore: bool,
        holds_state: Callable[[Path], bool] | None = None,
        progress: Callable[[], None] = lambda: None,
    ) -> None:
        self._config = config
        self._identity = identity
        self.path = path
        self._open_database = open_database
        self._stores = stores
        self._discard = discard
        self._restore = restore
        self._holds_state = holds_state
        self._progress = progress

    def open(
        self, state: ControlState, owned: set[Position]
    ) -> tuple[ProcessorDatabase, Completions]:
        """The database (restored if lost, replaced if stale) and what it completed."""
        database, completions = self._open(state, owned, restore=self._restore)
        missed = completions.missed(state)
        if missed and not database.created:
            described = ", ".join(f"{h.source} -> {h.target} of generation {g}" for g, h in missed)
            log.warning(
                "processor %d: the control log says another run of it completed handoff %s, "
                "which this state directory did not: what it holds is not the processor's "
                "state. It is moved aside and replaced, as a lost directory is (%s)",
                self._identity.processor,
                described,
                "from the newest snapshot" if self._restore else "rebuilt from the input",
            )
            database.close()
            self._discard(self.path)
            database, completions = self._open(state, owned, restore=self._restore)
            missed = completions.missed(state)
            if missed and not database.created:
                database.close()  # the snapshot missed it too: start empty
                self._discard(self.path)
                database, completions = self._open(state, owned, restore=False)
                missed = completions.missed(state)
        completions.mark(missed)  # a new directory holds nothing of them
        return database, completions

    def _open(
        self, state: ControlState, owned: set[Position], *, restore: bool
    ) -> tuple[ProcessorDatabase, Completions]:
        if restore:
            restore_lost_state(
                self._config,
                self._identity,
                self.path,
                owned,
                state.app.epoch if state.app else None,
                holds_state=self._holds_state,
                progress=self._progress,
            )
        database = self._open_database(self.path, self._identity, self._stores)
        return database, Completions(self._identity.processor, database, state)
