"""Which keys a processor forgets after a scale, and when: only what the control log says."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from framework.runtime.moved_keys import MovedKeys, doomed_ranges
from rebalance import HandoffEvent, bucket, key_hash
from rebalance.control import ControlState, handoff_record
from rebalance.key_ranges import key_prefix
from statestore import DatabaseIdentity, ProcessorDatabase, StoreSpec
from tests.rebalance.test_control import event, scale, started

KEYS = [f"word-{i}".encode() for i in range(400)]


def database_of(processor: int, owns: Any) -> ProcessorDatabase:
    identity = DatabaseIdentity("wc", processor, {"initial_processors": 2})
    database = ProcessorDatabase.in_memory(identity, [StoreSpec("c")])
    batch = database.begin()
    for key in KEYS:
        if owns(key):
            batch.store("c").set(key, 1)
    batch.commit()
    return database


def keys_of(database: ProcessorDatabase) -> set[bytes]:
    return {key for key, _ in database.items("c")}


def is_pending(moved: MovedKeys) -> bool:
    return moved.pending


def ready(processors: int = 3) -> ControlState:
    state = scale(started(2), 1, processors)
    state = event(state, 1, 0, 2, HandoffEvent.START_CATCH_UP)
    return event(state, 1, 0, 2, HandoffEvent.CAUGHT_UP)


def test_the_old_owner_forgets_moved_keys_only_once_the_log_says_released() -> None:
    database = database_of(0, lambda k: bucket(key_hash(k), 2, 2) == 0)
    mine = keys_of(database)
    moved = MovedKeys(0, database)
    moved.sync(ready())  # it may have written RELEASE; the log does not say so yet
    assert keys_of(database) == mine and not is_pending(moved)
    released = ready().apply(
        handoff_record(1, 0, 2, HandoffEvent.RELEASE, {("words", 2): 5, ("words", 6): 5})
    )
    moved.sync(released)
    assert is_pending(moved)
    moved.step()  # between two batches: a few range deletes
    assert not is_pending(moved)
    assert keys_of(database) == {k for k in mine if bucket(key_hash(k), 2, 3) == 0}


def test_an_abort_that_won_keeps_the_old_owners_keys_and_drops_the_receivers() -> None:
    old_owner = database_of(0, lambda k: bucket(key_hash(k), 2, 2) == 0)
    before = keys_of(old_owner)
    receiver = database_of(2, lambda k: bucket(key_hash(k), 2, 3) == 2)  # rebuilt so far
    aborted = ready().apply({"type": "abort", "generation": 1, "reason": "operator"})
    lost_race = aborted.apply(
        handoff_record(1, 0, 2, HandoffEvent.RELEASE, {("words", 2): 5, ("words", 6): 5})
    )
    owner_keys, receiver_keys = MovedKeys(0, old_owner), MovedKeys(2, receiver)
    for moved in (owner_keys, receiver_keys):
        moved.sync(lost_race)
        moved.finish()
    assert keys_of(old_owner) == before
    assert keys_of(receiver) == set()


def test_a_purge_left_by_a_crash_resumes_with_a_new_object() -> None:
    database = database_of(0, lambda k: bucket(key_hash(k), 2, 2) == 0)
    released = ready().apply(
        handoff_record(1, 0, 2, HandoffEvent.RELEASE, {("words", 2): 5, ("words", 6): 5})
    )
    first = MovedKeys(0, database)
    first.sync(released)  # registered; then the process dies before deleting anything
    second = MovedKeys(0, database)  # restarted; the log has moved on to a later scale
    assert second.pending
    second.finish()
    assert all(bucket(key_hash(k), 2, 3) == 0 for k in keys_of(database))


def completed_2_to_3() -> ControlState:
    state = ready()
    state = state.apply(
        handoff_record(1, 0, 2, HandoffEvent.RELEASE, {("words", 2): 5, ("words", 6): 5})
    )
    return event(state, 1, 0, 2, HandoffEvent.COMPLETE)


def test_a_release_seen_only_after_the_next_scale_began_is_still_forgotten() -> None:
    """The old owner was down while 2 -> 3 completed and 3 -> 4 began: the log's latest
    scale is no longer the one it released in, but the keys it gave away still go."""
    database = database_of(0, lambda k: bucket(key_hash(k), 2, 2) == 0)
    later = scale(completed_2_to_3(), 2, 4)
    assert later.scaling is not None and later.scaling.generation == 2
    moved = MovedKeys(0, database)
    moved.sync(later)
    moved.finish()
    assert keys_of(database) == {k for k in KEYS if bucket(key_hash(k), 2, 3) == 0}


def test_no_old_purge_deletes_keys_received_again_in_a_later_scale() -> None:
    """0 gave keys to 2 in generation 1 and gets them back in generation 2 (3 -> 2): a purge
    of generation 1 registered now would delete keys its generation-2 catch-up rebuilds."""
    database = database_of(0, lambda k: bucket(key_hash(k), 2, 2) == 0)
    back = scale(completed_2_to_3(), 2, 2)
    assert back.scaling is not None and back.scaling.incoming(0)
    moved = MovedKeys(0, database)
    moved.sync(back)
    moved.finish()
    assert keys_of(database) == {k for k in KEYS if bucket(key_hash(k), 2, 2) == 0}


def all_completed(state: ControlState) -> ControlState:
    """Every handoff of the scale in progress played to COMPLETE."""
    scaling = state.scaling
    assert scaling is not None
    g = scaling.generation
    for handoff in list(scaling.handoffs.values()):
        source, target = handoff.source, handoff.target
        state = event(state, g, source, target, HandoffEvent.START_CATCH_UP)
        state = event(state, g, source, target, HandoffEvent.CAUGHT_UP)
        offsets = dict.fromkeys(handoff.partitions, 5)
        state = state.apply(handoff_record(g, source, target, HandoffEvent.RELEASE, offsets))
        state = event(state, g, source, target, HandoffEvent.COMPLETE)
    return state


def test_keys_given_away_before_a_later_scale_that_brings_other_keys_are_still_forgotten() -> None:
    """Simulation seed 77: 2 -> 5, then 5 -> 2 (2 gives its keys to 0; down before it saw its
    release), then 2 -> 7 (2 receives other keys from 0). The keys it gave away in the second
    scale go, though it received keys in the third; the keys it receives stay for its
    catch-up."""
    database = database_of(2, lambda k: bucket(key_hash(k), 2, 5) == 2)
    held = keys_of(database)
    back = all_completed(scale(all_completed(scale(started(2), 1, 5)), 2, 2))
    again = scale(back, 3, 7)
    assert again.scaling is not None and again.scaling.incoming(2)
    moved = MovedKeys(2, database)
    moved.sync(again)
    moved.finish()
    assert keys_of(database) == {k for k in held if bucket(key_hash(k), 2, 7) == 2}


@given(
    st.lists(st.integers(min_value=0, max_value=2**32 - 1), min_size=1, max_size=40),
    st.integers(min_value=1, max_value=4),
    st.lists(st.integers(min_value=1, max_value=8), min_size=3, max_size=3),
)
def test_a_purges_ranges_hold_exactly_its_keys_less_the_keys_received_again(
    hashes: list[int], b: int, factors: list[int]
) -> None:
    """Keys 0 gave to ``target`` (old -> new), less those 0 received again (new -> later)."""
    old, new, later = (b * f for f in factors)
    target = new - 1
    spec = {"b": b, "old": old, "new": new, "target": target, "sources": [0]}
    spec["kept"] = [{"old": new, "new": later, "target": 0, "sources": [target]}]
    ranges = doomed_ranges(spec)
    for h in hashes:
        gone = bucket(h, b, new) == target and bucket(h, b, old) == 0
        back = bucket(h, b, later) == 0 and bucket(h, b, new) == target
        prefix = key_prefix(h, b)
        assert (gone and not back) == any(lo <= prefix < hi for lo, hi in ranges)
