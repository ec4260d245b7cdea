"""Deleting the keys of a few key ranges (a scale's moved keys), surviving a crash.

A purge is registered once under a name with a JSON ``spec`` (what the caller needs to rebuild
its ranges after a restart). Stored keys are ordered by bucket (``statestore.key_layout``), so
the keys a scale moves are a few ranges of key prefixes: ``step`` deletes them from every store
with range deletes, reading no key, and removes the purge record in the same atomic write. A
crash before that write leaves the purge registered, and the next run does it again; after it,
a flag says the name is done (registering it again does nothing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from statestore.database import ProcessorDatabase
from statestore.key_layout import KeyRange
from statestore.layout import META_STORE, flag_key

__all__ = ["KeyPurge", "pending_purges", "start_purge"]

_PREFIX = b"purge/"


def _record_key(name: str) -> bytes:
    return _PREFIX + name.encode()


def _done_flag(name: str) -> str:
    return f"purge-done/{name}"


def start_purge(database: ProcessorDatabase, name: str, spec: Mapping[str, Any]) -> bool:
    """Register purge ``name`` (unless it is registered or done); returns whether it is new."""
    backend = database.backend
    if backend.get(META_STORE, _record_key(name)) is not None or database.has_flag(
        _done_flag(name)
    ):
        return False
    backend.write({META_STORE: [(_record_key(name), orjson.dumps({"spec": dict(spec)}))]})
    return True


def pending_purges(database: ProcessorDatabase) -> dict[str, dict[str, Any]]:
    """Registered purges not done yet: name -> spec."""
    end = _PREFIX[:-1] + bytes([_PREFIX[-1] + 1])
    return {
        key[len(_PREFIX) :].decode(): orjson.loads(value)["spec"]
        for key, value in database.backend.scan(META_STORE, _PREFIX, end)
    }


class KeyPurge:
    """One registered purge, deleting the keys whose prefix lies in ``ranges`` (of an app
    with ``initial`` processors at the start)."""

    def __init__(
        self, database: ProcessorDatabase, name: str, initial: int, ranges: Sequence[KeyRange]
    ) -> None:
        self._database = database
        self.name = name
        #: the app's initial processor count the ranges were computed for
        self.initial = initial
        self.ranges = list(ranges)

    @property
    def done(self) -> bool:
        """Whether the keys were deleted."""
        return self._database.has_flag(_done_flag(self.name))

    def step(self) -> bool:
        """Delete the keys and mark the purge done, in one atomic write (nothing when it is
        not registered: done, or never started); returns ``True``: nothing is left to do."""
        if self._database.backend.get(META_STORE, _record_key(self.name)) is None:
            return True
        self._database.delete_ranges(
            self.initial,
            self.ranges,
            [(_record_key(self.name), None), (flag_key(_done_flag(self.name)), b"1")],
        )
        return True
