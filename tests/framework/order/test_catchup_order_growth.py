"""A growth child in a canonical catch-up (``CatchUpOrder``): its base is its parent's mark at
the marker, as the live loop's (``test_growth_bases``: clicks[0] has a click at 500, clicks[1]'s
marker, a click at 900; k's click in clicks[1] at 100 takes the base 500, so k's view at 300
goes first)."""

from __future__ import annotations

from framework import App, AppConfig, Record
from framework.config import TopicConfig
from framework.config_time import TimeConfig
from framework.runtime.catchup_order import CatchUpOrder
from framework.snapshots.source_starts import mark_scope
from rebalance import TopicHistory
from rebalance.positions import Position
from statestore import DatabaseIdentity, ProcessorDatabase
from tests.framework.order.test_growth_bases import PARENT, VIEWS
from tests.framework.order.test_input_order import _record
from tests.framework.order.test_review_faults import GROWN

C, C1, V0 = ("clicks", 0), ("clicks", 1), ("views", 0)
SCOPE = "catchup-1"
#: where the catch-up may apply each partition to: clicks[0] up to its marker (its bound)
ENDS: dict[Position, int | None] = {C: 2, C1: 1, V0: 2}


def _app() -> App:
    app = App(
        AppConfig(
            app_id="two",
            inputs=[TopicConfig(topic="clicks"), TopicConfig(topic="views")],
            initial_processors=1,
            time=TimeConfig(input_order="canonical"),
        )
    )
    app.store("s")

    @app.processor(stores=["s"])
    def f(record: Record[bytes], state: object) -> None:
        """Nothing."""

    return app


def _database(app: App, marks: dict[Position, int] | None = None) -> ProcessorDatabase:
    database = ProcessorDatabase.in_memory(DatabaseIdentity("two", 1), app.store_specs())
    batch = database.begin()
    for (topic, partition), mark in (marks or {}).items():
        batch.set_progress(mark_scope(SCOPE), topic, partition, mark)
    batch.commit()
    return database


def _read(order: CatchUpOrder, reads: dict[Position, int]) -> list[tuple[Position, int, bool]]:
    """Read what lies from ``reads`` up to ``ENDS``; what is released: (position, offset,
    whether it applies)."""
    order.ends(ENDS)
    log = [*PARENT[:2], _record(C1, 0, 100), *VIEWS]
    for message, topic, partition, offset in log:
        if offset >= reads[(topic, partition)]:
            order.add(message, (topic, partition), offset, message.key() == b"k")
    return [(position, offset, applies) for _m, position, offset, applies in order.release()]


def test_a_child_read_with_its_parent_takes_the_parents_mark_at_the_marker() -> None:
    app = _app()
    database = _database(app)
    order = CatchUpOrder(app, {"clicks": GROWN, "views": TopicHistory.of("views", [1])}, SCOPE)
    reads = order.start({C: 0, C1: 0, V0: 0}, database)
    released = _read(order, reads)
    assert [(p, o) for p, o, applies in released if applies] == [(V0, 0), (C1, 0)]
    batch = database.begin()
    order.commit(batch)
    batch.commit()
    assert database.progress(mark_scope(SCOPE))[C1] == 500  # (the child's base, its mark)


def test_a_parent_resumed_past_the_marker_is_read_again_for_the_childs_base() -> None:
    """The catch-up's progress has clicks[0] at its bound (past the marker) and clicks[1] at
    its life's start with no mark: clicks[0] is read again from 0 for its marks (nothing of it
    applied again), so the child takes its base 500."""
    app = _app()
    database = _database(app, {C: 500, V0: 300})
    order = CatchUpOrder(app, {"clicks": GROWN, "views": TopicHistory.of("views", [1])}, SCOPE)
    reads = order.start({C: 2, C1: 0, V0: 0}, database)
    assert reads == {C: 0, C1: 0, V0: 0}
    released = _read(order, reads)
    assert not [o for p, o, applies in released if p == C and applies]
    batch = database.begin()
    order.commit(batch)
    batch.commit()
    assert database.progress(mark_scope(SCOPE))[C1] == 500


def test_a_child_with_its_mark_kept_does_not_read_its_parent_again() -> None:
    app = _app()
    database = _database(app, {C: 500, C1: 500, V0: 0})
    order = CatchUpOrder(app, {"clicks": GROWN, "views": TopicHistory.of("views", [1])}, SCOPE)
    assert order.start({C: 2, C1: 0, V0: 0}, database) == {C: 2, C1: 0, V0: 0}
