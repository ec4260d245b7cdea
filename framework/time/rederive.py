"""The keys' due times, derived again when the app's time declarations changed.

Store ``DUE_STORE`` keeps each key's earliest due times (``keeper.due_times``), which depend
on what the app declares: a window store's kind (its size, step, gap and grace) and which
window and timer stores exist. A key's are written whenever a record or a tick changes the
key, so after a new version of the app declares them differently, a key not touched since
keeps due times of the old declarations: a window whose grace (or size) became shorter, or a
store declared again, would not close at the tick that should close it (ticks are applied to
the keys the due times name), and a record would close it only after its function ran.

So a processor derives every key's due times again from its time record before it applies
anything with declarations other than those they were derived with (noted in the database,
``NOTE``; a new database has none, and takes the current ones). What that gives depends on
the state and the app only, so every reader that holds the same state derives the same.
"""

from __future__ import annotations

import dataclasses
import hashlib

import orjson

import framework.time.window_state as windows_of
from framework.app import App
from framework.time.keeper import due_times
from framework.time.key_clock import TIME_STORE, DamagedTimeError, KeyClock
from statestore import ProcessorDatabase
from statestore.due_index import DUE_STORE, NEVER, encode_due

__all__ = ["NOTE", "declarations", "rederive_due"]

#: the database note naming the declarations its due times were derived with
NOTE = "time.due-declarations"
_CHUNK = 10_000


def declarations(app: App) -> str:
    """A digest of what a key's due times depend on in ``app``: its window stores' kinds and
    its timer stores."""
    windows = {
        name: [type(spec.kind).__name__, dataclasses.asdict(spec.kind)]
        for name, spec in app.windows.items()
    }
    declared = {"windows": windows, "timers": sorted(app.timers)}
    return hashlib.sha256(orjson.dumps(declared, option=orjson.OPT_SORT_KEYS)).hexdigest()


def rederive_due(database: ProcessorDatabase, app: App) -> int:
    """Derive every key's due times in ``database`` again for ``app``'s declarations, unless
    they were derived with them already; returns how many keys' due times changed. A key
    whose time record is damaged keeps what it has (a tick passes over it)."""
    if not app.uses_time:
        return 0
    digest = declarations(app)
    if database.note(NOTE) == digest:
        return 0
    changed = 0
    batch = database.begin()
    for key, raw in database.items(TIME_STORE):
        try:
            clock = KeyClock.decode(bytes(raw))
        except DamagedTimeError:
            continue
        if any(
            spec is not None and windows_of.check(spec.kind, data) is not None
            for spec, data in ((app.windows.get(s), d) for s, d in clock.windows.items())
        ):
            continue  # (damaged too)
        due = due_times(clock, app.windows, app.timers)
        stored = database.get(DUE_STORE, key)
        wanted = None if due == (NEVER, NEVER) else encode_due(*due)
        if (None if stored is None else bytes(stored)) == wanted:
            continue
        if wanted is None:
            batch.store(DUE_STORE).delete(key)
        else:
            batch.store(DUE_STORE).set(key, wanted)
        changed += 1
        if changed % _CHUNK == 0:
            batch.commit()
            batch = database.begin()
    batch.commit()
    database.set_note(NOTE, digest)  # (after the due times: a crash between derives again)
    return changed
