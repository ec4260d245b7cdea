"""The interval join (``App.interval_join``) through ``TestDriver``: each match once, inner,
left and outer, equal times, records out of order, the same results in any interleaving of
the two inputs and after a restart, buffers expired by key time, late records."""

from __future__ import annotations

import orjson
import pytest

from framework.testing import TestDriver
from tests.framework.joins.join_world import (
    drawn,
    interleaved,
    join_app,
    oracle,
    pairs,
    send,
    unread,
)

STORE = "splitstate.join.match"


def test_a_match_is_emitted_once_when_the_second_of_the_two_is_applied() -> None:
    driver = TestDriver(join_app(before=100))
    send(driver, [("payments", b"k0", 1_000, 1)])
    assert pairs(driver) == []
    send(driver, [("orders", b"k0", 950, 2)])  # (it waits for the payments' mark: released)
    send(driver, [("payments", b"k0", 1_010, 3)])  # matches order 2 too (950 >= 1010 - 100)
    send(driver, [("orders", b"k0", 1_020, 4)])  # after the payments: no match (after=0)
    driver.advance_time(5_000)
    assert pairs(driver) == [(1, 2), (3, 2)]


def test_equal_times_match_and_the_earlier_input_is_applied_first() -> None:
    driver = TestDriver(join_app(before=0, after=0))
    send(driver, [("orders", b"k0", 1_000, 1), ("payments", b"k0", 1_000, 2)])
    driver.advance_time(5_000)
    assert pairs(driver) == [(2, 1)]


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ("inner", [(1, 2)]),
        ("left", [(1, 2), (3, None)]),
        ("outer", [(1, 2), (None, 4), (3, None)]),
    ],
)
def test_inner_left_and_outer(how: str, expected: list[tuple[int | None, int | None]]) -> None:
    """Payment 3 (at 1650) matches nothing, nor does order 4 (at 1500): the left join emits
    the payment alone, the outer join the order too, each once its window is past."""
    driver = TestDriver(join_app(how, before=100))  # type: ignore[arg-type]
    send(
        driver,
        [
            ("payments", b"k0", 1_000, 1),
            ("orders", b"k0", 990, 2),
            ("orders", b"k0", 1_500, 4),
            ("payments", b"k0", 1_650, 3),
        ],
    )
    driver.advance_time(1_000_000)
    assert pairs(driver) == expected


def test_an_unmatched_record_is_emitted_when_a_tick_passes_its_window() -> None:
    """No other record of the key comes: a tick (the partition's time, recorded) closes it,
    at the first tick past ``t + after + grace``, not before."""
    driver = TestDriver(join_app("left", before=100, after=50, grace=20))
    send(driver, [("payments", b"k0", 1_000, 1), ("orders", b"k1", 1_000, 2)])
    driver.advance_time(1_070)  # 1000 + 50 + 20: a right record at 1050 could still come
    assert pairs(driver) == []
    driver.advance_time(1_071)
    assert pairs(driver) == [(1, None)]
    driver.advance_time(2_000)
    assert pairs(driver) == [(1, None)]  # once


def test_records_out_of_order_within_grace_match() -> None:
    driver = TestDriver(join_app(before=100, grace=200))
    send(
        driver,
        [
            ("payments", b"k0", 2_000, 1),
            ("orders", b"k0", 2_050, 2),  # after the payment: not in [1900, 2000]
            ("payments", b"k0", 2_100, 3),  # matches order 2
            ("orders", b"k0", 1_950, 4),  # out of order, 150 behind: matches payment 1
        ],
    )
    driver.advance_time(10_000)
    assert sorted(pairs(driver)) == [(1, 4), (3, 2)]
    assert driver.dead_letters == []


def test_a_record_older_than_the_grace_is_a_late_dead_letter() -> None:
    """Order 2 comes after order 5 (at 5000) in its partition, so it is applied after
    payment 1 (at 5000): the key's time is 5000, and 4899 + grace is below it."""
    driver = TestDriver(join_app(before=1_000, grace=100), on_error="dead-letter")
    send(
        driver,
        [
            ("payments", b"k0", 5_000, 1),
            ("orders", b"k0", 5_000, 5),
            ("orders", b"k0", 4_899, 2),  # late: it would match (4899 >= 5000 - 1000)
            ("orders", b"k0", 4_900, 3),  # not late: 4900 + 100 is the key's time
        ],
    )
    driver.advance_time(10_000)
    assert pairs(driver) == [(1, 5), (1, 3)]
    (letter,) = driver.dead_letters
    assert (letter.stage, letter.topic, letter.offset) == ("late", "orders", 1)
    assert "interval join 'match'" in letter.reason and "grace" in letter.reason


def test_buffers_are_expired_by_the_keys_time() -> None:
    """A key whose time moves on keeps only what can still match: its buffer stays small
    however many records it gets."""
    driver = TestDriver(join_app("outer", before=100, after=10))
    for n in range(400):
        topic = "payments" if n % 2 else "orders"
        at = 1_000 + 50 * n
        send(driver, [(topic, b"k0", at, n)])
        driver.advance_time(at)  # (the other partitions' time: nothing waits for them)
        stored = driver.state(STORE, b"k0")
        assert stored is not None
        buffered = orjson.loads(stored)
        assert len(buffered.get("l", [])) + len(buffered.get("r", [])) <= 4
    driver.advance_time(1_000_000)
    assert driver.state(STORE, b"k0") is None
    emitted = pairs(driver)
    seen = [n for pair in emitted for n in pair if n is not None]
    assert sorted(set(seen)) == list(range(400))  # each record in an output


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_matches_are_the_oracles_when_nothing_is_late(seed: int) -> None:
    sent = drawn(seed, 150)
    driver = send(TestDriver(join_app(before=40, after=20, grace=10_000)), sent)
    driver.advance_time(10_000_000)
    found = pairs(driver)
    assert len(found) == len(set(found))  # each once
    assert set(found) == oracle(sent, 40, 20)


@pytest.mark.parametrize("how", ["inner", "left", "outer"])
@pytest.mark.parametrize("seed", [4, 5])
def test_any_interleaving_of_the_inputs_gives_the_same_results(seed: int, how: str) -> None:
    """Late records and expiries included (grace 0, some records 45 ms behind)."""
    sent = drawn(seed, 200)
    results = []
    for arrival in (sent, interleaved(sent, seed), interleaved(sent, seed + 100)):
        driver = send(TestDriver(join_app(how, before=30, after=10)), arrival)  # type: ignore[arg-type]
        driver.advance_time(10_000_000)
        results.append((pairs(driver), [(d.topic, d.offset, d.stage) for d in driver.dead_letters]))
    assert results[0] == results[1] == results[2]
    assert results[0][1]  # (some were late)
    assert results[0][0]  # (and some matched)


@pytest.mark.parametrize("cut", [20, 77, 150])
def test_a_driver_going_on_from_the_state_emits_what_one_run_emits(cut: int) -> None:
    """A processor restarted on its state goes on as if never stopped: the outputs before
    the restart and after it are one run's, each once."""
    sent = drawn(9, 200)
    whole = send(TestDriver(join_app("outer", before=30, after=10)), sent)
    whole.advance_time(10_000_000)
    first = send(TestDriver(join_app("outer", before=30, after=10)), sent[:cut])
    resumed = TestDriver(join_app("outer", before=30, after=10), database=first.database)
    send(resumed, unread(first, sent, cut))
    resumed.advance_time(10_000_000)
    assert pairs(first) + pairs(resumed) == pairs(whole)
    assert first.dead_letters + resumed.dead_letters == whole.dead_letters
