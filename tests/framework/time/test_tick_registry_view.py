"""A tick is judged the same by every reader, however new its view of the topic registry.

The input went 4 -> 8 -> 5 partitions: partition 5 was deleted, its keys merged into 1 from
1's hold offset (20), measured before the registry recorded the shrink. A processor whose
view lacks the shrink read a tick in 1 past the hold as if 5's keys still lived in 5: their
windows stayed open there, while a reader with a newer view (a restart, a catch-up, Spark)
closed them at the tick. Now a tick names how many steps of the history its writer knew
(``"steps"``): a reader with fewer reads the registry again first, and every reader applies
the tick by those steps (a step its writer did not know brings it no key). A tick that
names no steps (not a processor's) is judged after the registry is read again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson

from framework.coordination.registry import TopicEntry
from framework.processing import RecordProcessor, StoredMessage
from framework.time.ticks import TICK_HEADER
from rebalance import Grow, Shrink, TopicHistory, bucket, key_hash
from statestore import DatabaseIdentity, ProcessorDatabase
from tests.framework.test_forged_markers import Registry
from tests.framework.time_world import GRACE, SIZE, TOPIC, window_app

N = 4
#: 4 -> 8 (each child's marker at 3 in its parent), then -> 5 (holds at 20, drains at 10)
GROWN = TopicHistory(
    TOPIC, (N, 8), (Grow(8, dict.fromkeys(range(4, 8), 0), dict.fromkeys(range(4, 8), 3)),)
)
SHRUNK = TopicHistory(
    TOPIC, (N, 8, 5), (*GROWN.steps, Shrink(5, {1: 20, 2: 20, 3: 20}, {5: 10, 6: 10, 7: 10}))
)
#: past every window of the records below (they are at 1 s)
CLOSING = SIZE + GRACE + 1


def _key(where: Callable[[int], bool]) -> bytes:
    return next(k for k in (f"key-{i}".encode() for i in range(1000)) if where(key_hash(k)))


#: lives in 5 at 8 partitions, merged into 1 by the shrink
MERGED = _key(lambda h: bucket(h, N, 8) == 5 and bucket(h, N, 5) == 1)
#: lives in 1 throughout
STAYING = _key(lambda h: bucket(h, N, 8) == 1)


def _reader(
    tmp_path: Path, view: TopicHistory, registry: Registry | None = None
) -> RecordProcessor:
    app = window_app(tmp_path, partitions=N, initial=1)
    read = None if registry is None else registry.read
    return RecordProcessor(app, {TOPIC: N}, histories={TOPIC: view}, registry=read)


def _closed(reader: RecordProcessor, tick: StoredMessage) -> set[bytes]:
    """The keys whose window ``tick`` closes, after each key's record opened one (each
    message read, as the live loop does, after ``confirm_markers``)."""
    database = ProcessorDatabase.in_memory(
        DatabaseIdentity("timed", 0, {"initial_processors": 1}), reader.app.store_specs()
    )
    records = [
        StoredMessage(TOPIC, 5, 2, MERGED, b"1", 1_000, []),
        StoredMessage(TOPIC, 1, 2, STAYING, b"1", 1_000, []),
    ]
    closed: set[bytes] = set()
    for message in [*records, tick]:
        reader.confirm_markers([message])
        batch = database.begin()
        outputs, dead = reader.process(batch, message)
        batch.commit()
        assert dead is None, dead
        closed |= {o.key for o in outputs if o.key is not None}
    return closed


def _tick(steps: int | None) -> StoredMessage:
    """A tick in survivor 1 past its hold (20), naming ``steps`` (``None``: none, as
    ``tick_headers`` writes it)."""
    said = {"floor": CLOSING, "wall": CLOSING} | ({} if steps is None else {"steps": steps})
    headers: list[tuple[str, bytes | None]] = [(TICK_HEADER, orjson.dumps(said))]
    return StoredMessage(TOPIC, 1, 25, None, b"", CLOSING, headers)


def test_a_view_without_the_shrink_reads_the_registry_before_a_tick_that_names_no_steps(
    tmp_path: Path,
) -> None:
    registry = Registry({TOPIC: TopicEntry(SHRUNK)})
    stale = _closed(_reader(tmp_path, GROWN, registry), _tick(None))
    assert stale == _closed(_reader(tmp_path, SHRUNK), _tick(None)) == {MERGED, STAYING}
    assert registry.reads == 1


def test_a_tick_is_judged_by_the_steps_its_writer_knew_whatever_the_readers_view(
    tmp_path: Path,
) -> None:
    # written before the registry recorded the shrink (its hold was measured before): the
    # merged key takes it from no reader, the stale one reads nothing again
    registry = Registry({TOPIC: TopicEntry(SHRUNK)})
    assert _closed(_reader(tmp_path, GROWN, registry), _tick(1)) == {STAYING}
    assert registry.reads == 0
    assert _closed(_reader(tmp_path, SHRUNK), _tick(1)) == {STAYING}
    # written knowing the shrink: a view without it reads the registry again first
    assert _closed(_reader(tmp_path, GROWN, registry), _tick(2)) == {MERGED, STAYING}
    assert registry.reads == 1
    assert _closed(_reader(tmp_path, SHRUNK), _tick(2)) == {MERGED, STAYING}


def test_a_key_moved_away_at_a_marker_before_the_tick_does_not_take_it(tmp_path: Path) -> None:
    # a tick in parent 1 past its marker (3), written knowing no step: MOVED left for 5 at
    # the marker (met in 1 itself, so every reader knows it); STAYING takes the tick
    moved = _key(lambda h: bucket(h, N, N) == 1 and bucket(h, N, 8) == 5)
    reader = _reader(tmp_path, GROWN)
    for key, partition in ((moved, 1), (STAYING, 1)):
        assert reader.placement.lives_at(key, (TOPIC, partition, 2), 0)  # before the marker
    assert not reader.placement.lives_at(moved, (TOPIC, 1, 4), 0)
    assert reader.placement.lives_at(STAYING, (TOPIC, 1, 4), 0)
    assert reader.placement.lives_at(moved, (TOPIC, 5, 4), 1)  # its child, by the growth
    assert not reader.placement.lives_at(moved, (TOPIC, 5, 4), 0)  # a child it did not know


def test_a_tick_naming_steps_no_registry_records_is_a_dead_letter(tmp_path: Path) -> None:
    registry = Registry({TOPIC: TopicEntry(SHRUNK)})
    reader = _reader(tmp_path, GROWN, registry)
    tick = _tick(3)
    reader.confirm_markers([tick])
    assert registry.reads == 1  # read again, still 2 steps
    database = ProcessorDatabase.in_memory(
        DatabaseIdentity("timed", 0, {"initial_processors": 1}), reader.app.store_specs()
    )
    batch = database.begin()
    outputs, dead = reader.process(batch, tick)
    batch.abort()
    assert outputs == [] and dead is not None and dead.stage == "placement"
    assert dead.reason.startswith("a tick written knowing 3 steps (growths, shrinks) of in's")
    assert "the topic registry records 2" in dead.reason and "Fix: " in dead.reason
