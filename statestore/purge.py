"""Deleting the keys a predicate names, in bounded steps that survive a crash.

A purge is registered once under a name with a JSON ``spec`` (what the caller needs to rebuild
its predicate after a restart). Each ``step`` scans at most ``budget`` keys from where the last
step stopped and deletes the doomed ones; the deletions and the new position are one atomic
write, so a crash between steps resumes exactly there. When every store was scanned, the purge
record is removed and a flag says the name is done (registering it again does nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

from statestore.database import ProcessorDatabase
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
    record = {"spec": dict(spec), "store": None, "after": None}
    backend.write({META_STORE: [(_record_key(name), orjson.dumps(record))]})
    return True


def pending_purges(database: ProcessorDatabase) -> dict[str, dict[str, Any]]:
    """Registered purges not done yet: name -> spec."""
    end = _PREFIX[:-1] + bytes([_PREFIX[-1] + 1])
    return {
        key[len(_PREFIX) :].decode(): orjson.loads(value)["spec"]
        for key, value in database.backend.scan(META_STORE, _PREFIX, end)
    }


class KeyPurge:
    """One registered purge, deleting the keys ``doomed`` names from every user store."""

    def __init__(
        self, database: ProcessorDatabase, name: str, doomed: Callable[[bytes], bool]
    ) -> None:
        self._database = database
        self.name = name
        self._doomed = doomed
        self.deleted = 0

    @property
    def done(self) -> bool:
        """Whether every store was scanned."""
        return self._database.has_flag(_done_flag(self.name))

    def step(self, budget: int = 5_000) -> bool:
        """Scan up to ``budget`` keys, delete the doomed ones; returns whether it is done."""
        backend = self._database.backend
        raw = backend.get(META_STORE, _record_key(self.name))
        if raw is None:
            return self.done
        record = orjson.loads(raw)
        stores = self._database.store_names()
        store = record["store"] or (stores[0] if stores else None)
        after = None if record["after"] is None else bytes.fromhex(record["after"])
        doomed: list[bytes] = []
        last: bytes | None = None
        scanned = 0
        if store is not None:
            start = None if after is None else after + b"\x00"
            for key, _value in backend.scan(store, start):
                scanned += 1
                last = key
                if self._doomed(key):
                    doomed.append(key)
                if scanned >= budget:
                    break
        changes: dict[str, list[tuple[bytes, bytes | None]]] = {}
        if doomed and store is not None:
            changes[store] = [(key, None) for key in doomed]
        finished = False
        if store is not None and scanned >= budget:
            record["store"], record["after"] = store, None if last is None else last.hex()
        else:  # this store is scanned to its end: the next one, or done
            later = [s for s in stores if store is None or s > store]
            if later:
                record["store"], record["after"] = later[0], None
            else:
                finished = True
        meta: list[tuple[bytes, bytes | None]] = []
        if finished:
            meta = [(_record_key(self.name), None), (flag_key(_done_flag(self.name)), b"1")]
        else:
            meta = [(_record_key(self.name), orjson.dumps(record))]
        changes[META_STORE] = meta
        backend.write(changes)
        self.deleted += len(doomed)
        return finished

    def finish(self) -> int:
        """Run every remaining step now; returns how many keys this object deleted."""
        while not self.step(50_000):
            pass
        return self.deleted
