"""What the checks read of a compacted input (a plan with ``compacted``).

Producers write values and *deletes* (a null value naming itself in ``DELETE_HEADER``;
``tests/sim/app.py``), and ``SplitstateProducer`` adds *compaction tombstones* (a null value
with the ``splitstate.compaction`` header) in a key's earlier homes, which exist only for the
cleaner: no processor may apply one, emit for one or make one a dead letter. The cleaner
(``Broker.clean``) removes records; those it removed before the app's group read past them
may have been read by no processor, so they need no outputs and a later record's
``previous`` may skip them. Every other record is checked as in a plan without compaction:
the state is the latest value in the lineage order of the input.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from tests.sim.app import COMPACTION_APPLIED, DELETE_HEADER, FoldState, parse
from tests.sim.broker import StoredRecord

__all__ = [
    "COMPACTION_HEADER",
    "check_latest_state",
    "compaction_tombstone",
    "held_value",
    "key_values",
    "named",
    "previous_problem",
]

#: the header of a compaction-only tombstone (issue 34, "Compacted inputs")
COMPACTION_HEADER = "splitstate.compaction"


def compaction_tombstone(record: StoredRecord) -> bool:
    """Whether ``record`` is a compaction tombstone (null value, ``COMPACTION_HEADER``)."""
    return record.value is None and any(name == COMPACTION_HEADER for name, _ in record.headers)


def named(record: StoredRecord) -> str | None:
    """``"<producer>:<seq>[:<kind>]"`` of a producer's record (its value, or a delete's
    header), ``None`` for any other (a marker, a compaction tombstone)."""
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
    """Each key's state at its owner (``state_of``) is the value of its last record applied
    (``applied``: each key's records the function applies, in lineage order), none after a
    delete. When the cleaner removed that record (``kept``: whether the input still holds
    one), a later record of its partition that the function does not apply (poison, a
    killer, a late one) superseded it: a rebuild cannot see it, and the state may be that of
    any earlier record of the key, or none."""
    for key, records in sorted(applied.items()):
        last = records[-1]
        wanted = None if last.value is None else {"v": held_value(last)}
        held = state_of(key)
        if held != wanted and not kept(last):
            earlier = {held_value(record) for record in records if record.value is not None}
            if held is None or held.get("v") in earlier:
                continue
        if held != wanted:
            add(
                f"{key!r} at processor {owner_of(key)}: state {held}; its last record "
                f"{last.topic}[{last.partition}]@{last.offset} ({named(last)}"
                f"{', a delete' if last.value is None else ''}) leaves {wanted}"
            )


def previous_problem(
    where: tuple[str, int, int],
    previous: object,
    producer: str,
    order: dict[tuple[str, int, int], int],
    values: dict[str, int],
) -> str | None:
    """What is wrong with an output of the input record at ``where`` saying its key's value
    was ``previous`` before it (``None``: nothing). ``order``: each applied record's index in
    its key's lineage order; ``values``: the index of each value (``"<producer>:<seq>"``)
    of the key. The value before may be any earlier one of the key or none (a rebuild
    from a compacted log holds an older value, or none, until a later record comes), never
    a later one nor one the function did not keep."""
    if producer == COMPACTION_APPLIED:
        return f"the function got the compaction tombstone at {where}"
    if previous is None:
        return None
    index = order.get(where)
    earlier = values.get(str(previous))
    if index is None or earlier is None or earlier >= index:
        return (
            f"output of {where[0]}[{where[1]}]@{where[2]} says its key held {previous!r} before "
            f"it: {'not a value of the key' if earlier is None else 'a later record'}"
        )
    return None


def held_value(record: StoredRecord) -> str:
    """The value the function keeps for ``record``: ``"<producer>:<seq>"``."""
    producer, seq, _kind = parse(str(named(record)))
    return f"{producer}:{seq}"


def key_values(records: Iterable[StoredRecord]) -> dict[str, int]:
    """The lineage index of each value (not delete) among a key's applied ``records``."""
    return {
        held_value(record): index
        for index, record in enumerate(records)
        if record.value is not None
    }
