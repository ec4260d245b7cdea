"""The fold of an app that keeps time applies each tick to the keys living where it sits.

No Spark: ``AppFold`` takes the keyed records in lineage order, as the job hands them over,
and the ticks (``TickTable``); each key's stores after it -- ``splitstate.time`` and
``splitstate.due`` included -- must be the bytes the live run leaves
(``timed_app.live_run``), through a growth (2 -> 4) and through 4 -> 8 -> 5 -> 7 (a shrink,
then partitions grown again, ticks in deleted partitions).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework.bootstrap import arrow_rows
from framework.bootstrap.fold import AppFold
from framework.bootstrap.key_ticks import END, KeySpans
from framework.bootstrap.tick_table import PartitionTicks, TickTable
from framework.time.ticks import read_tick, tick_headers
from rebalance import TopicHistory, key_hash
from tests.framework.test_spark_fold import records_table
from tests.framework.time import test_replay as replayed
from tests.framework.timed_app import (
    START,
    TOPIC,
    B,
    History,
    live_run,
    make_history,
    make_lives_history,
    state_items,
    timed_app,
)

app = timed_app()


def lineage_order(log: History) -> list[tuple[Any, ...]]:
    """The keyed records (the job leaves keyless ones out) by ``(rank, offset)``."""
    history = log.history
    keyed = [row for row in log.rows() if row[3] is not None]
    return sorted(keyed, key=lambda r: (history.rank(r[1], r[2]), r[2]))


def tick_table(log: History) -> TickTable:
    return TickTable.of(
        ((TOPIC, p, o, [(n, x) for n, x in h]) for p, o, k, _v, _t, h in log.written if k is None),
        app=app.config.app_id,
    )


def fold(log: History) -> tuple[AppFold, list[tuple[str, bytes, bytes]]]:
    """The fold's items, from a table of three chunks (as Spark's ``take`` may give)."""
    folder = AppFold(app, {TOPIC: log.initial}, {TOPIC: log.history}, B, tick_table(log))
    table = records_table(lineage_order(log))
    third = table.num_rows // 3
    chunks = [table.slice(0, third), table.slice(third, third), table.slice(2 * third)]
    return folder, sorted(folder(pa.concat_tables(chunks)))


@pytest.mark.parametrize("seed", [35, 3, 17])
def test_each_key_gets_the_time_state_of_the_live_run_through_a_growth(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    if seed == 3:  # a key's records across the fold's chunks of rows
        monkeypatch.setattr(arrow_rows, "CHUNK", 7)
    log = make_history(seed)
    live, _outputs = live_run(app, log, log.written)
    _folder, items = fold(log)
    assert items == sorted(state_items(live, app))
    assert len({key for _, key, _ in items}) == 24


@pytest.mark.parametrize("seed", [34, 8])
def test_each_key_gets_the_time_state_of_the_live_run_through_a_shrink_and_a_regrowth(
    seed: int,
) -> None:
    log = make_lives_history(seed)
    live, _outputs = live_run(app, log, log.written)
    _folder, items = fold(log)
    assert items == sorted(state_items(live, app))
    assert len({key for _, key, _ in items}) == 40


@pytest.mark.parametrize("seed", [34, 8])
def test_the_fold_judges_each_tick_by_the_history_steps_its_writer_knew(seed: int) -> None:
    """4 -> 8 -> 5 -> 7 with ticks written by views older than where they land (the first
    after each change name the steps before it): the fold applies each by the steps it
    names, as the live run does, not by the whole history it builds with; ticks naming
    fewer steps there reach fewer keys than the whole history would give them."""
    log = make_lives_history(seed, stepped=True)
    live, _outputs = live_run(app, log, log.written)
    _folder, items = fold(log)
    assert items == sorted(state_items(live, app))
    unstepped, _outputs = live_run(app, log, _unstepped(log.written))
    assert sorted(state_items(unstepped, app)) != items  # (the steps changed something)


def _unstepped(written: list[Any]) -> list[Any]:
    """``written`` with each tick naming no steps (judged by the whole history)."""
    found = []
    for partition, offset, key, value, stamp, headers in written:
        read = read_tick(headers) if key is None else "not a tick"
        unstepped = [] if isinstance(read, str) else tick_headers(read.floor, read.wall, read.app)
        kept = unstepped or headers
        found.append((partition, offset, key, value, stamp, kept))
    return found


@pytest.mark.parametrize("make", [make_history, make_lives_history])
def test_a_key_lives_in_a_span_where_its_history_places_it(make: Callable[..., History]) -> None:
    """A tick in a parent after a growth's marker, in a child before its start, in a deleted
    partition after its drain marker or in a survivor before its hold is in no span of the
    keys that do not live there at its offset (``TopicHistory.home_at``), and every tick is
    in the span of each key living there."""
    log = make()
    table = tick_table(log)
    spans = KeySpans({TOPIC: log.history}, table)
    for i in range(48):
        key = f"sensor-{i:02d}".encode()
        h = key_hash(key)
        found = spans.spans(key)
        assert found == sorted(found)
        for partition, offset in log.ticks:
            inside = [s for s in found if s.position[1] == partition and s.start <= offset < s.end]
            lives = log.history.home_at(h, partition, offset) == partition
            assert len(inside) == int(lives), (key, partition, offset)
            if lives:
                assert inside[0].rank == log.history.rank(partition, offset)


def test_the_first_due_tick_is_found_as_a_scan_finds_it() -> None:
    rng = random.Random(4)
    for size in [1, 2, 3, 7, 64, 100, 257, 4099]:
        floors = np.asarray([rng.randrange(1000) for _ in range(size)], dtype=np.int64)
        walls = np.asarray([rng.randrange(1000) for _ in range(size)], dtype=np.int64)
        ticks = PartitionTicks(np.arange(size, dtype=np.int64) * 3, floors, walls)
        for _ in range(300):
            low = rng.randrange(size + 1)
            high = rng.randrange(low, size + 1)
            event, wall = rng.randrange(1100), rng.choice([rng.randrange(1100), END])
            scan = next(
                (i for i in range(low, high) if floors[i] >= event or walls[i] >= wall), high
            )
            assert ticks.first_due(low, high, event, wall) == scan


def test_ticks_that_change_nothing_for_a_key_are_not_applied_to_it() -> None:
    """200 keys with one record each, then 1,000 ticks in each of two partitions: each key's
    windows close, its timers fire and its value expires within the first ticks, and after that
    nothing of it is due. The fold applies the ticks that make something due, not every tick
    to every key (which would be 200,000 applications for the keys of a partition)."""
    log = History()
    keys = [f"key-{i:03d}".encode() for i in range(200)]
    for i, key in enumerate(keys):
        log.record(key, 3 * i, START + i, 2)
    for step in range(1000):
        for partition in (0, 1):
            log.tick(partition, START + step * 10_000, START + step * 10_000)
    folder, items = fold(log)
    applied = 0
    processor = folder._processor
    assert processor is not None
    process = processor.process

    def counted(batch: Any, message: Any, **options: Any) -> Any:
        nonlocal applied
        applied += message.key() is None
        return process(batch, message, **options)

    processor.process = counted  # type: ignore[method-assign]
    again = sorted(folder(records_table(lineage_order(log))))
    assert again == items
    live, _outputs = live_run(app, log, log.written)
    assert items == sorted(state_items(live, app))
    assert 0 < applied <= 6 * len(keys), applied
    assert len(log.ticks) * len(keys) // 2 > 100 * applied


def test_a_malformed_tick_is_counted_and_applies_to_nothing() -> None:
    rows: list[tuple[str, int, int, list[tuple[str, bytes | None]] | None]] = [
        (TOPIC, 0, 3, list(tick_headers(5, 6))),
        (TOPIC, 0, 1, [("splitstate.tick", b"{not json")]),
        (TOPIC, 1, 2, [("splitstate.tick", b'{"floor": 1}')]),
        (TOPIC, 0, 3, list(tick_headers(5, 6))),  # read twice (an archive's duplicate)
    ]
    table = TickTable.of(rows, app="folded")
    assert table.malformed == 2
    assert len(table) == 1
    assert table.tick((TOPIC, 0), 0) == (3, 5, 6, None)


def test_the_table_holds_the_apps_own_ticks_and_those_naming_no_app() -> None:
    """Another app's tick is passed over by every reader: the fold's table leaves it out
    (it is no malformed one either)."""
    rows: list[tuple[str, int, int, list[tuple[str, bytes | None]] | None]] = [
        (TOPIC, 0, 1, list(tick_headers(5, 6, "folded", steps=2))),
        (TOPIC, 0, 2, list(tick_headers(50, 60, "another"))),
        (TOPIC, 0, 3, list(tick_headers(7, 8))),  # (written before ticks named their app)
        (TOPIC, 1, 0, list(tick_headers(50, 60, "another"))),
    ]
    table = TickTable.of(rows, app="folded")
    assert table.malformed == 0
    assert sorted(table.partitions) == [(TOPIC, 0)]
    assert [table.tick((TOPIC, 0), i) for i in range(len(table))] == [(1, 5, 6, 2), (3, 7, 8, None)]


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(steps=replayed.inputs, built=st.integers(0, 30), cuts=st.lists(st.integers(0, 70)))
def test_a_fold_of_random_records_and_ticks_is_the_drivers_state_and_continues_as_it(
    steps: list[replayed.Step], built: int, cuts: list[int]
) -> None:
    """The promise's property (``tests/framework/time/test_replay.py``'s app and inputs: every
    kind of window, event and wall timers, a failing timer, values that expire): the fold of
    the first ``built`` steps is every key's state the test driver leaves there, and a
    processor that goes on from it emits what the driver emits for the rest, per key."""
    built = min(built, len(steps))
    head = replayed.messages(steps[:built])
    folder = AppFold(
        replayed.APP,
        {"in": replayed.PARTITIONS},
        {"in": TopicHistory.of("in", [replayed.PARTITIONS])},
        1,
        TickTable.of(
            ((m.topic(), m.partition(), m.offset(), m.headers()) for m in head if m.key() is None),
            app=replayed.APP.config.app_id,
        ),
    )
    keyed = sorted((m for m in head if m.key() is not None), key=lambda m: m.offset())
    table = records_table(
        [
            (m.topic(), m.partition(), m.offset(), m.key(), m.value(), m.timestamp()[1], None)
            for m in keyed
        ]
    )
    with replayed._database(None) as database:
        items: dict[str, list[tuple[bytes, bytes | None]]] = {}
        for store, key, raw in folder(table):
            items.setdefault(store, []).append((key, raw))
        database.backend.write(items)
        state = replayed.Seen()
        state.read(database, replayed.KEYS)
        assert state.state == replayed.by_driver(steps[:built]).state
        got = replayed.by_batches(steps, cuts, database, skip=len(head))
    expected = replayed.by_driver(steps)
    later = replayed.after(steps, built)
    assert got.of(replayed.KEYS, later) == expected.of(replayed.KEYS, later)
