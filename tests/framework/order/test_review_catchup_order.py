"""Review of the canonical catch-up (branch ``catchup-order``): reproductions of what a
receiver's catch-up still does differently from its old owner, each a strict ``xfail``
naming the defect."""

from __future__ import annotations

from pathlib import Path

from framework import App, Record
from framework.input_times import ORDER_SCOPE
from framework.kafka import Message
from framework.processing import RecordProcessor
from framework.runtime.catchup import CatchUp
from framework.runtime.catchup_order import CatchUpOrder
from framework.runtime.crashes import skipped_records
from framework.snapshots.source_starts import mark_scope
from rebalance import TopicHistory
from rebalance.plan import read_set
from rebalance.positions import Position
from statestore import DatabaseIdentity, KeyState, ProcessorDatabase
from tests.framework.order.appending_app import INPUTS, PARTITIONS, Event, config
from tests.framework.order.catchup_world import (
    APP_ID,
    GAINED_KEYS,
    finish,
    gained_state,
    scale_state,
    world,
)
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


def test_a_catch_up_applies_a_survivors_keys_as_their_old_owner() -> None:
    _owner, applied, _marks = _caught_up()
    assert _of_k(applied)[b"k"] == CANONICAL[b"k"]


def test_a_catch_up_hands_over_a_survivors_mark_as_its_old_owners() -> None:
    owner, _applied, marks = _caught_up()
    assert marks.get(V0) == owner[V0]


class Died(BaseException):
    """The process died (what no ``except Exception`` catches)."""


def _killed_by(poison: Position, offset: int) -> App:
    """``appending_app`` whose function kills the process on the record at ``offset`` of
    ``poison``."""
    app = App(config())
    app.store("applied")

    @app.processor(value_type=Event, event_time="at", stores=["applied"])
    def append(record: Record[Event], state: KeyState[str]) -> None:
        """Append where the record came from and its time (die on the poison record)."""
        if ((record.topic, record.partition), record.offset) == (poison, offset):
            raise Died(f"{poison}@{offset}")
        state.set(f"{state.get() or ''}{record.topic}{record.value.at},")

    return app


def test_a_catch_up_skips_only_the_record_that_kills_it(tmp_path: Path) -> None:
    """Gained key k has one record in each input at 100 ms (a[1]@0, b[1]@0; T1 = F = 1);
    a[1]@0 kills the receiver's function every time. Under ``arrival`` the guard isolates
    it (one record per batch) and skips it alone after ``crash_limit`` (3) deaths. In the
    canonical order each of the two waits for the other's partition to end, so every batch
    holds both."""
    kafka, _owner = world()
    key = GAINED_KEYS[0]
    for topic in INPUTS:
        record = {"key": key, "value": b'{"at":100}', "headers": (), "timestamp_ms": 100}
        kafka.broker.append((topic, 1), {**record, "origin": "test"})
    finals: dict[Position, int] = {(topic, 1): 1 for topic in INPUTS}
    histories = {topic: TopicHistory.of(topic, [PARTITIONS]) for topic in INPUTS}
    scaling = scale_state().scaling
    assert scaling is not None
    for _run in range(6):
        app = _killed_by(("a", 1), 0)
        database = ProcessorDatabase.open(
            tmp_path / "db", DatabaseIdentity(APP_ID, 1), app.store_specs()
        )
        records = RecordProcessor(app, dict.fromkeys(INPUTS, PARTITIONS), histories=histories)
        kafka.broker.groups[APP_ID] = dict(finals)
        catchup = CatchUp(
            1, 1, scaling, kafka=kafka, group_id=APP_ID, database=database, records=records
        )
        catchup.refresh(force=True)
        try:
            finish(kafka, catchup, finals)
        except Died:
            continue
        finally:
            catchup.close()
            database.close()
        break
    specs = _killed_by(("a", 1), 0).store_specs()
    database = ProcessorDatabase.open(tmp_path / "db", DatabaseIdentity(APP_ID, 1), specs)
    try:
        skipped = [(s.topic, s.partition, s.offset) for s in skipped_records(database)]
        assert skipped == [("a", 1, 0)]
        assert gained_state(database) == {key: "b100,"}  # (the old owner applied b[1]@0)
    finally:
        database.close()
