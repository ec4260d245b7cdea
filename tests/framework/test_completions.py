"""``Completions``: a handoff into this processor that another run completed is cleared from
its directory once, before its partitions are read; one it completed itself, and any before
the directory was first tracked, are never touched."""

from __future__ import annotations

from framework.runtime.completions import Completions, completed_flag
from rebalance import HandoffEvent, bucket, key_hash
from rebalance.control import ControlState, handoff_record
from statestore import DatabaseIdentity, ProcessorDatabase, StoreSpec
from statestore.memory import MemoryBackend
from tests.rebalance.test_control import scale, started
from tests.sim.disks import KeptBackend

IDENTITY = DatabaseIdentity("wc", 2, {"initial_processors": 2})
MOVED = {("words", 2): 5, ("words", 6): 5}  # 2 -> 3 moves partitions 2 and 6 to processor 2


def _keys() -> tuple[bytes, bytes]:
    """A key processor 2 gains from processor 0 in the scale 2 -> 3, and one it never has."""
    gained = next(
        k
        for k in (f"k{i}".encode() for i in range(1000))
        if bucket(key_hash(k), 2, 3) == 2 and bucket(key_hash(k), 2, 2) == 0
    )
    other = next(
        k for k in (f"o{i}".encode() for i in range(1000)) if bucket(key_hash(k), 2, 3) == 1
    )
    return gained, other


def _completed_scale() -> ControlState:
    state = scale(started(2), 1, 3)
    for event in (HandoffEvent.START_CATCH_UP, HandoffEvent.CAUGHT_UP):
        state = state.apply(handoff_record(1, 0, 2, event))
    state = state.apply(handoff_record(1, 0, 2, HandoffEvent.RELEASE, MOVED))
    state = state.apply(handoff_record(1, 0, 2, HandoffEvent.COMPLETE))
    assert state.scaling is None and state.processors == 3
    return state


def _database(backend: MemoryBackend) -> ProcessorDatabase:
    return ProcessorDatabase.in_memory(IDENTITY, [StoreSpec("counts")], backend)


def _write(database: ProcessorDatabase, key: bytes, value: int, offset: int) -> None:
    batch = database.begin()
    batch.store("counts").set(key, value)
    batch.set_offset("words", 2, offset)
    batch.commit()


def test_a_handoff_another_run_completed_is_cleared_once() -> None:
    gained, other = _keys()
    database = _database(MemoryBackend())  # a new directory: every scale is tracked
    _write(database, gained, 17, 3)  # half a catch-up, or keys left from an earlier owner
    _write(database, other, 4, 3)
    completions = Completions(2, database, ControlState())
    assert completions.tracked_from == 0
    cleared = completions.settle(_completed_scale())
    assert [h.target for h in cleared] == [2]
    assert database.get("counts", gained) is None  # rebuilt from empty from here on
    assert database.get("counts", other) == 4  # not a gained key
    assert ("words", 2) not in database.offsets()  # its stale offset goes too
    # rebuilt since: a later state (a restart) never clears it again
    _write(database, gained, 1, 1)
    assert Completions(2, database, ControlState()).settle(_completed_scale()) == []
    assert database.get("counts", gained) == 1


def test_a_handoff_completed_here_is_kept() -> None:
    gained, _other = _keys()
    database = _database(MemoryBackend())
    batch = database.begin()
    batch.store("counts").set(gained, 9)
    batch.set_offset("words", 2, 5)
    batch.set_flag(completed_flag(1, 0))  # as CatchUp.complete writes it
    batch.commit()
    assert Completions(2, database, ControlState()).settle(_completed_scale()) == []
    assert database.get("counts", gained) == 9
    assert database.offsets()[("words", 2)] == 5


def test_a_directory_from_before_completions_were_tracked_keeps_its_handoffs() -> None:
    gained, _other = _keys()
    stores: dict[str, dict[bytes, bytes]] = {}
    old = _database(KeptBackend(stores))
    _write(old, gained, 9, 5)
    old.checked_fresh()  # a directory a run of an older splitstate used
    old.close()
    reopened = _database(KeptBackend(stores))
    assert not reopened.created and not reopened.fresh
    state = _completed_scale()
    completions = Completions(2, reopened, state)
    assert completions.tracked_from == 2  # only scales after the newest it may have seen
    assert completions.settle(state) == []
    assert reopened.get("counts", gained) == 9
