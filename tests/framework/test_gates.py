"""Ordering gates per life and per key (``framework.growth.gates``), on a hand-built history
of 2 partitions: 2 -> 4 (2 and 3 split from 0 and 1), 4 -> 2 (2 and 3 deleted: their keys
merge back into 0 and 1), 2 -> 3 (2 re-grown from 0: a new life, its offsets going on)."""

from __future__ import annotations

from framework.coordination.registry import TopicEntry
from framework.growth.gates import Gates, PositionOf, Wait, blocked_partitions
from rebalance import Grow, Shrink, TopicHistory, bucket, key_hash

T = "in"
HISTORY = TopicHistory(
    T,
    (2, 4, 2, 3),
    (
        Grow(4, {2: 0, 3: 0}, {2: 10, 3: 7}),
        Shrink(2, {0: 20, 1: 15}, {2: 30, 3: 12}),
        Grow(3, {2: 40}, {2: 50}),
    ),
)


def key(partition: int, count: int, *, also: tuple[int, int] | None = None) -> int:
    """The hash of a key ``count`` partitions place in ``partition`` (and ``also``: (count,
    partition) another count places it in)."""
    for i in range(10_000):
        h = key_hash(f"k{i}".encode())
        if bucket(h, 2, count) == partition and (also is None or bucket(h, 2, also[0]) == also[1]):
            return h
    raise AssertionError("no such key")


def at(**positions: int) -> PositionOf:
    """Positions of partitions ``p0``, ``p1``... (unlisted: never read)."""
    found = {(T, int(name[1:])): offset for name, offset in positions.items()}
    return found.get


def test_a_survivor_holds_only_the_keys_merged_into_it_until_their_partition_drained() -> None:
    gates = Gates({T: HISTORY})
    merged = key(2, 4)  # lived in 2 until the shrink, then in 0
    own = key(0, 4)
    assert gates.waits(T, 0, 25, merged, at(p0=25, p2=30)) == Wait(T, 0, 2, 31)
    assert gates.waits(T, 0, 25, own, at(p0=25, p2=30)) is None  # 0's own keys never wait
    assert gates.waits(T, 0, 25, None, at(p0=25, p2=30)) is None  # markers never wait
    assert gates.waits(T, 0, 19, merged, at(p0=19)) is None  # before the hold: still 2's key
    assert gates.waits(T, 0, 25, merged, at(p0=25, p2=31)) is None  # 2 read past its drain
    assert gates.waits(T, 0, 26, merged, at()) is None  # met once, met for good


def test_a_regrown_life_is_gated_again_at_its_start() -> None:
    gates = Gates({T: HISTORY})
    h = key(2, 3)  # a key of 2's new life (it lived in 2's first life too)
    assert gates.waits(T, 2, 5, h, at(p0=11)) is None  # the first life: 0 passed its marker
    # the new life waits for 0 to pass the new marker, and 0 to be read past its own hold
    # of 2's keys, which needs 2 drained: positions alone do not open it
    assert gates.waits(T, 2, 40, h, at(p0=60, p2=30)) == Wait(T, 2, 0, 51)
    assert gates.waits(T, 2, 40, h, at(p0=50, p2=31)) == Wait(T, 2, 0, 51)
    assert gates.waits(T, 2, 40, h, at(p0=51, p2=31)) is None


def test_an_unrecorded_boundary_holds() -> None:
    history = TopicHistory(T, (2, 4, 2), (HISTORY.steps[0], Shrink(2, {0: 20, 1: 15})))
    gates = Gates({T: history})
    merged = key(2, 4)
    wait = gates.waits(T, 0, 20, merged, at(p2=1_000))
    assert wait == Wait(T, 0, 2, None)
    assert (
        wait.reason(1000)
        == "in[0] holds keys of in[2] until `splitstate expand` records its drain marker"
    )
    assert (
        Wait(T, 0, 2, 31).reason(4)
        == "in[0] holds keys of in[2] until it passes offset 30 (now at 4)"
    )


def test_pending_is_cheap_and_settles() -> None:
    gates = Gates({T: HISTORY})
    assert not gates.pending(T, 1, 14)  # below 1's only gate (its hold at 15)
    assert gates.pending(T, 1, 15)
    gates.settle(T, 1, 15, at(p1=15, p3=13))
    assert not gates.pending(T, 1, 10_000)
    assert not gates.pending(T, 0, 19) and gates.pending(T, 0, 20)


def test_blocked_partitions_shows_each_life_of_a_grown_partition() -> None:
    inputs = {T: TopicEntry(HISTORY)}
    candidates = [(T, 2), (T, 3)]
    never_read = blocked_partitions(inputs, candidates, {}, at())
    assert never_read == {
        (T, 2): "waiting until in[0] passes offset 10 (now at -)",
        (T, 3): "waiting until in[1] passes offset 7 (now at -)",
    }
    # 2's first life read; between its drain and its new life nothing is held (records
    # there are late); at the new life it is held again
    assert blocked_partitions(inputs, candidates, {(T, 2): 35}, at(p0=45, p1=8, p2=35)) == {}
    assert blocked_partitions(inputs, candidates, {(T, 2): 40}, at(p0=45, p1=8, p2=40)) == {
        (T, 2): "waiting until in[0] passes offset 50 (now at 45)"
    }
