"""A stored mark that is not one (not an integer, or outside ``NO_FLOOR``..``LARGEST``) is
refused as it is read back, naming where it was read (the processor's state, the catch-up's
progress scope, the snapshot by its id) and what to do (``framework.stored_marks``); before,
``MergeBuffer.assign`` refused it naming neither, or ``int()`` failed on it."""

from __future__ import annotations

import pytest

from framework.input_times import ORDER_SCOPE
from framework.order.marks import LARGEST
from framework.runtime.catchup_order import CatchUpOrder
from framework.snapshots.source_starts import mark_scope, snapshot_marks
from framework.stored_marks import BadStoredMarkError, stored_marks
from rebalance import TopicHistory
from statestore import ProcessorDatabase
from statestore.layout import META_STORE, offset_key
from tests.framework.order.input_order_world import input_order
from tests.framework.order.test_catchup_order_growth import _app

C, V = ("clicks", 0), ("views", 0)
TOPICS = {"clicks": TopicHistory.of("clicks", [1]), "views": TopicHistory.of("views", [1])}
BAD = [b"soon", str(LARGEST + 1).encode(), b"", b"\xff"]


def _stored(database: ProcessorDatabase, scope: str, raw: bytes) -> None:
    """Offsets 3 for both inputs, marks 10 for clicks and ``raw`` for views in ``scope``."""
    batch = database.begin()
    for topic, partition in (C, V):
        batch.set_offset(topic, partition, 3)
    batch.set_progress(scope, *C, 10)
    batch.commit()
    database.backend.write({META_STORE: [(offset_key(*V, scope), raw)]})


@pytest.mark.parametrize("raw", BAD)
def test_a_bad_stored_mark_is_refused_naming_where_and_the_fix(raw: bytes) -> None:
    _order, database, _clock = input_order({})
    _stored(database, "some-scope", raw)
    with pytest.raises(BadStoredMarkError) as refused:
        stored_marks(database.backend, "some-scope", "the source", "do this.")
    message = str(refused.value)
    assert message.startswith("the source: the mark of views[0] stored in progress scope")
    assert "'some-scope'" in message and message.endswith("Fix: do this.")


def test_good_stored_marks_are_read() -> None:
    _order, database, _clock = input_order({})
    _stored(database, "some-scope", b"-7")
    assert stored_marks(database.backend, "some-scope", "s", "f") == {C: 10, V: -7}


def test_the_live_order_refuses_a_bad_mark_of_its_state() -> None:
    order, database, _clock = input_order({})
    _stored(database, ORDER_SCOPE, b"soon")
    with pytest.raises(BadStoredMarkError, match=r"^the state of processor 0: .*views\[0\]"):
        order.follow({C, V})


def test_a_catch_up_refuses_a_bad_mark_of_its_progress() -> None:
    _order, database, _clock = input_order({})
    _stored(database, mark_scope("catchup-1"), str(LARGEST + 1).encode())
    catchup = CatchUpOrder(_app(), TOPICS, "catchup-1")
    with pytest.raises(BadStoredMarkError) as refused:
        catchup.start({C: 3, V: 3}, database)
    message = str(refused.value)
    assert message.startswith("the catch-up catchup-1 of processor 0: the mark of views[0]")
    assert "'catchup-1-mark'" in message and "--abort" in message


def test_a_snapshot_with_a_bad_mark_is_refused_naming_it() -> None:
    _order, database, _clock = input_order({})
    _stored(database, ORDER_SCOPE, b"soon")
    with pytest.raises(BadStoredMarkError, match=r"^snapshot 42-abc: .*views\[0\]"):
        snapshot_marks(database.backend, {C: 3, V: 3}, "42-abc")
