"""Review of the canonical catch-up (branch ``catchup-order``): reproductions of what a
receiver's catch-up still does differently from its old owner, each a strict ``xfail``
naming the defect."""

from __future__ import annotations

import pytest

from framework.input_times import ORDER_SCOPE
from framework.kafka import Message
from framework.runtime.catchup_order import CatchUpOrder
from framework.snapshots.source_starts import mark_scope
from rebalance import TopicHistory
from rebalance.plan import read_set
from rebalance.positions import Position
from statestore import DatabaseIdentity, ProcessorDatabase
from tests.framework.order.test_catchup_order_growth import _app
from tests.framework.order.test_input_order import SHRUNK, _commit
from tests.framework.order.test_survivor_marks import CANONICAL, V0, Logs, _first_part, _of_k

C = ("clicks", 0)
SCOPE = "catchup-1"
#: the receiver's inputs: clicks (one partition) and views (``SHRUNK``: views[1] drained
#: into views[0] at offset 1, views[0] held from 2)
TOPICS = {"clicks": TopicHistory.of("clicks", [1]), "views": SHRUNK}


def _caught_up() -> tuple[dict[Position, int], list[Message], dict[Position, int]]:
    """The old owner (``test_survivor_marks``: one processor reads every partition, views[0]
    held by its gate until views[1] is read past its drain marker) and a receiver gaining
    key k (S1: clicks[0] and views[0]; S2 adds views[1], the deleted partition, up to its
    bound) that catches up to the old owner's committed offsets (T1 = F): the owner's marks
    at F, what the receiver applied, and its marks at F (which ``complete`` hands over to
    the live ``order-mark``)."""
    logs = Logs()
    order, database, clock, _released = _first_part(logs)
    logs.run(order, clock, logs.log[V0][2:])  # (its gate open)
    _commit(order, database)
    finals, owner_marks = database.offsets(), database.progress(ORDER_SCOPE)
    bounds = {(r.topic, r.partition): r.end_offset for r in read_set(TOPICS, [C, V0])}
    receiver = ProcessorDatabase.in_memory(DatabaseIdentity("two", 1), _app().store_specs())
    catchup = CatchUpOrder(_app(), TOPICS, SCOPE)
    reads = catchup.start(dict.fromkeys(bounds, 0), receiver, bounds)
    ends = {p: finals[p] if b is None else min(b, finals[p]) for p, b in bounds.items()}
    catchup.ends(ends)
    for position in sorted(bounds):
        for message, _topic, _partition, offset in logs.log[position]:
            if reads[position] <= offset < ends[position]:
                catchup.add(message, position, offset, message.key() == b"k")
        catchup.passed({position: ends[position]})
    applied = [message for message, _p, _o, applies in catchup.release() if applies]
    assert not catchup.waiting()
    batch = receiver.begin()
    catchup.commit(batch)
    batch.commit()
    return owner_marks, applied, receiver.progress(mark_scope(SCOPE))


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="catch-up shrink survivor not linked to its deleted partition: views[0]'s items "
    "from its hold keep views[0]'s own marks (50), not views[1]'s final mark (100), so k's "
    "view in views[0] is applied before its clicks (the old owner applied it after them)",
)
def test_a_catch_up_applies_a_survivors_keys_as_their_old_owner() -> None:
    _owner, applied, _marks = _caught_up()
    assert _of_k(applied)[b"k"] == CANONICAL[b"k"]


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="catch-up shrink survivor: its mark at F (55) is not the old owner's (100), and "
    "complete() hands it over to the live order-mark, so the live loop goes on from F with "
    "it: every key of views[0] (not only the shrink's moved keys) is ordered against marks "
    "below the deleted partition's final mark until views[0]'s own times pass it",
)
def test_a_catch_up_hands_over_a_survivors_mark_as_its_old_owners() -> None:
    owner, _applied, marks = _caught_up()
    assert marks.get(V0) == owner[V0]
