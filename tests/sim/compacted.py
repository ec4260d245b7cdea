"""What the checks read of a compacted input (a plan with ``compacted``).

Producers write values and *deletes* (a null value naming itself in ``DELETE_HEADER``;
``tests/sim/app.py``), and ``SplitstateProducer`` adds *compaction tombstones* (a null value
with the ``splitstate.compaction`` header) in a key's earlier homes, which exist only for the
cleaner: no processor may apply one, emit for one or make one a dead letter. The cleaner
(``Broker.clean``) removes records: those it removed before the app's group read past them
may have been read by no processor, so they need no outputs; and a rebuild from the log
(a lost disk, a catch-up) does not see a record removed before it read it, so the value a
key holds right before a record (an output's ``previous``, and at the end its state) is
that of the record before it in the lineage order of the input, or, past records removed
since, of an earlier one (``values_before``).
"""

from __future__ import annotations

from collections.abc import Callable

from framework.time.ticks import is_tick
from tests.sim.app import COMPACTION_APPLIED, DELETE_HEADER, FoldState, parse
from tests.sim.broker import StoredRecord

__all__ = [
    "COMPACTION_HEADER",
    "DELETE_RETENTION_MS",
    "check_latest_state",
    "compaction_tombstone",
    "held_value",
    "input_configs",
    "named",
    "previous_problem",
    "values_before",
]

#: the header of a compaction-only tombstone (issue 34, "Compacted inputs")
COMPACTION_HEADER = "splitstate.compaction"
#: a compacted input's ``delete.retention.ms``: how long the cleaner keeps a tombstone
DELETE_RETENTION_MS = 5_000


def input_configs(compacted: bool) -> dict[str, str]:
    """The input topic's configs: a compacted one's (``Plan.compacted``) or the defaults."""
    if not compacted:
        return {}
    return {
        "cleanup.policy": "compact",
        "delete.retention.ms": str(DELETE_RETENTION_MS),
        "min.compaction.lag.ms": "0",
    }


def compaction_tombstone(record: StoredRecord) -> bool:
    """Whether ``record`` is a compaction tombstone (null value, ``COMPACTION_HEADER``)."""
    return record.value is None and any(name == COMPACTION_HEADER for name, _ in record.headers)


def named(record: StoredRecord) -> str | None:
    """``"<producer>:<seq>[:<kind>]"`` of a producer's record (its value, or a delete's
    header), ``None`` for any other (a marker, a compaction tombstone, a tick)."""
    if is_tick(record.headers):
        return None
    if record.value is not None:
        return record.value.decode()
    for name, value in record.headers:
        if name == DELETE_HEADER and value is not None:
            return value.decode()
    return None


def check_latest_state(
    applied: dict[bytes, list[StoredRecord]],
    state_of: Callable[[bytes], FoldState | None],
    owner_of: Callable[[bytes], int],
    kept: Callable[[StoredRecord], bool],
    add: Callable[[str], None],
) -> None:
    """Each key's state at its owner (``state_of``) is the value its records leave
    (``applied``: each key's records the function applies, in lineage order; ``kept``:
    whether the input still holds a record): ``values_before`` the end."""
    for key, records in sorted(applied.items()):
        held = state_of(key)
        allowed = values_before(records, len(records), kept)
        if (None if held is None else held.get("v")) not in allowed:
            last = records[-1]
            add(
                f"{key!r} at processor {owner_of(key)}: state {held}; its last record "
                f"{last.topic}[{last.partition}]@{last.offset} ({named(last)}"
                f"{', a delete' if last.value is None else ''}) leaves "
                f"{' or '.join(map(str, sorted(allowed, key=str)))}"
            )


def values_before(
    records: list[StoredRecord], index: int, kept: Callable[[StoredRecord], bool]
) -> set[str | None]:
    """The values (``"<producer>:<seq>"``, ``None``: none) a key may hold right before its
    applied record ``records[index]`` (``records``: in lineage order): the value of the one
    before, or, when the cleaner (or retention) removed that one (``kept``: whether the
    input still holds a record), the value of any earlier one up to the last it still holds
    (a rebuild from the log read it, or not), or none when it holds none."""
    allowed: set[str | None] = set()
    for record in reversed(records[:index]):
        allowed.add(None if record.value is None else held_value(record))
        if kept(record):
            return allowed
    allowed.add(None)
    return allowed


def previous_problem(
    where: tuple[str, int, int], previous: object, producer: str, allowed: set[str | None]
) -> str | None:
    """What is wrong with an output of the input record at ``where`` saying its key's value
    was ``previous`` before it (``None``: nothing): it must be one of ``allowed``
    (``values_before`` the record)."""
    if producer == COMPACTION_APPLIED:
        return f"the function got the compaction tombstone at {where}"
    if previous in allowed:
        return None
    return (
        f"output of {where[0]}[{where[1]}]@{where[2]} says its key held {previous!r} before "
        f"it; the input says {' or '.join(map(str, sorted(allowed, key=str)))}"
    )


def held_value(record: StoredRecord) -> str:
    """The value the function keeps for ``record``: ``"<producer>:<seq>"``."""
    producer, seq, _kind = parse(str(named(record)))
    return f"{producer}:{seq}"
