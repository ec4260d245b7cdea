"""The invariants of a timed plan (``Plan.timed``): the world's time is the oracle's.

The oracle (``tests/sim/time_oracle.py``) folds each key alone through its canonical
sequence. Whatever processors computed it, across every fault of the plan:

- every output on ``TIMED`` (a window's result, a late record's note, a timer's output, what
  the function read of its expiring value) is one the oracle emits for its key: never a
  wrong value;
- with exactly-once outputs each is emitted once; otherwise again only after the process
  that emitted it was killed or stopped on an error (or, under at-least-once, by both
  instances of a twinned processor), as a record's fold outputs (``tests/sim/checks.py``);
- once the world settled, every one the oracle emits was emitted, the first emissions of a
  key's outputs in the oracle's order (unless some of the emitter's outputs expired in its
  producer's queue);
- once settled, each key's time record (``splitstate.time``), its due times
  (``splitstate.due``) and its ``recent`` value at its owner are the oracle's, and no other
  processor of the generation in force holds any of them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from statestore import ProcessorDatabase
from tests.sim.checks import Violation, owner_of
from tests.sim.time_oracle import COMPARED_STORES, KeyTruth, time_oracle
from tests.sim.timed_app import TIMED
from tests.sim.world import World

__all__ = ["Emitters", "check_time", "emission_problems"]


def check_time(world: World, processors: int | None) -> list[str]:
    """The broken time invariants of ``world`` (``[]`` unless its plan is timed): of a
    settled world whose generation in force has ``processors`` processors, or of what was
    emitted until a world stopped unsettled (``None``)."""
    if not world.plan.timed:
        return []
    found = Violation()
    truths = time_oracle(world)
    for key, truth in sorted(truths.items()):
        for problem in truth.problems:
            found.add(problem)
        if len(set(truth.outputs)) != len(truth.outputs):
            found.add(f"the oracle emits an output of {key!r} twice: {truth.outputs}")
    _check_emitted(world, truths, found, complete=processors is not None)
    if processors is not None:
        _check_stores(world, truths, processors, found)
    return found.problems


def _check_emitted(
    world: World, truths: dict[bytes, KeyTruth], found: Violation, *, complete: bool
) -> None:
    emitted: dict[bytes, dict[bytes, list[str]]] = defaultdict(dict)
    for record in world.broker.committed_records(TIMED):
        assert record.key is not None, f"a keyless output {record}"
        emitted[record.key].setdefault(record.value or b"", []).append(record.origin)
    exactly_once = world.plan.exactly_once
    emission_problems(
        emitted,
        truths,
        Emitters(
            cut_short=world.events.cut_short,
            repeats_allowed=set() if exactly_once else world.events.twinned,
            expired=world.broker.expired_origins,
            exactly_once=exactly_once,
        ),
        found.add,
        complete=complete,
    )


@dataclass(frozen=True)
class Emitters:
    """What the world says of the processes that emitted (``Events``): killed or stopped on
    an error (``cut_short``), allowed to repeat outputs (``repeats_allowed``: under
    at-least-once, the runs of a twinned processor), some of whose outputs expired in their
    producer's queue (``expired``); and whether outputs are exactly-once."""

    cut_short: set[str] = field(default_factory=set)
    repeats_allowed: set[str] = field(default_factory=set)
    expired: set[str] = field(default_factory=set)
    exactly_once: bool = False


def emission_problems(
    emitted: dict[bytes, dict[bytes, list[str]]],
    truths: dict[bytes, KeyTruth],
    emitters: Emitters,
    add: Callable[[str], None],
    *,
    complete: bool,
) -> None:
    """``add`` what is wrong with ``emitted`` (key -> output value -> the processes that
    emitted it, in order; values in the order first emitted) by the oracle's ``truths``."""
    for key in sorted(set(emitted) | set(truths)):
        truth = truths.get(key, KeyTruth())
        outputs = emitted.get(key, {})
        wanted = {value: at for at, value in enumerate(truth.outputs)}
        by_identity = {_identity(value): value for value in truth.outputs}
        for value, origins in outputs.items():
            if value not in wanted:
                same = by_identity.get(_identity(value))
                said = "none such" if same is None else _show(same)
                add(f"{key!r}: {TIMED} has {_show(value)} from {origins}; the oracle: {said}")
            elif emitters.exactly_once and len(origins) > 1:
                add(f"{key!r}: {_show(value)} was emitted {len(origins)} times: {origins}")
            elif uncut := [
                o
                for o in origins[:-1]
                if o not in emitters.cut_short and o not in emitters.repeats_allowed
            ]:
                add(
                    f"{key!r}: {_show(value)} was emitted by {origins}, though {uncut} was "
                    "neither killed nor stopped on an error"
                )
        if complete and (missing := [v for v in truth.outputs if v not in outputs]):
            add(
                f"{key!r}: {len(missing)} of the oracle's {len(truth.outputs)} outputs were "
                f"never emitted: {', '.join(_show(v) for v in missing[:3])}"
            )
        ranks = [wanted[value] for value in outputs if value in wanted]
        expiry = any(o in emitters.expired for origins in outputs.values() for o in origins)
        if ranks != sorted(ranks) and not expiry:
            add(
                f"{key!r}: outputs first emitted in the oracle's order {ranks[:30]}: "
                f"{' '.join(_show(truth.outputs[r], 60) for r in ranks[:8])}"
            )


def _check_stores(
    world: World, truths: dict[bytes, KeyTruth], processors: int, found: Violation
) -> None:
    held: dict[int, dict[str, dict[bytes, bytes]]] = {}
    for j in range(processors):
        database = world.disks.read(world.state_path(j))
        if database is None:
            held[j] = {}
            continue
        try:
            held[j] = {name: _raw_items(database, name) for name in COMPARED_STORES}
        finally:
            database.close()
    for j, stores in sorted(held.items()):
        for name, items in stores.items():
            for key in items:
                if owner_of(world, key, processors) != j:
                    found.add(f"processor {j} holds {name} of {key!r}, owned by another")
    for key, truth in sorted(truths.items()):
        owner = owner_of(world, key, processors)
        for name in COMPARED_STORES:
            got = held.get(owner, {}).get(name, {}).get(key)
            if got != truth.stores[name]:
                found.add(
                    f"{key!r} at processor {owner}: {name} holds {_show(got)}, the oracle "
                    f"{_show(truth.stores[name])}"
                )


def _raw_items(database: ProcessorDatabase, store: str) -> dict[bytes, bytes]:
    """``store``'s committed values as stored, by user key (whatever the codecs that
    ``database`` was opened with: a read-only one decodes every store as JSON)."""
    if store not in database.backend.store_names():
        return {}
    user = database.layout.user
    return {user(key): bytes(raw) for key, raw in database.backend.scan(store, None, None)}


def _identity(value: bytes) -> tuple[Any, ...]:
    """What names an output among its key's: a window's store and start, a note's record, a
    timer's name and due time (``tests/sim/timed_app.py``)."""
    try:
        said = orjson.loads(value)
    except orjson.JSONDecodeError:
        return (value,)
    if not isinstance(said, list) or not said:
        return (value,)
    width = {"window": 3, "late": 4, "ttl": 3, "timer": 3}.get(str(said[0]), len(said))
    return tuple(orjson.dumps(part) for part in said[:width])


def _show(value: Any, limit: int = 300) -> str:
    """``value`` readably (bytes as text), cut to ``limit`` characters."""
    if isinstance(value, bytes):
        try:
            text = value.decode()
        except UnicodeDecodeError:
            text = value.hex()
    else:
        text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
