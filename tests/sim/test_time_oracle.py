"""The oracle of a timed plan (``tests/sim/time_oracle.py``) and the checks against it
(``tests/sim/time_checks.py``): a key's sequence, what folding it gives, and which emissions
the checks refuse."""

from __future__ import annotations

import orjson

from framework.time.ticks import tick_headers
from rebalance import key_hash
from tests.sim.app import INPUT
from tests.sim.broker import StoredRecord
from tests.sim.event_times import LATE_MS, event_delays
from tests.sim.time_checks import Emitters, emission_problems
from tests.sim.time_oracle import KeyTruth, oracle_of

KEY = b"k"


def _record(partition: int, offset: int, value: str, at: int) -> StoredRecord:
    return StoredRecord(INPUT, partition, offset, KEY, value.encode(), (), at, "p")


def _tick(partition: int, offset: int, floor: int) -> StoredRecord:
    headers = tuple(tick_headers(floor, floor))
    return StoredRecord(INPUT, partition, offset, None, None, headers, floor, "ticker")


def _home(h: int, partition: int, offset: int) -> int:
    """``KEY`` lives in partition 0 until offset 5, then in its child 2; other keys in 1."""
    if h != key_hash(KEY):
        return partition
    if partition == 1:
        return 0
    return 0 if partition == 0 and offset < 5 else 2


def _takes(h: int, tick: StoredRecord) -> bool:
    return _home(h, tick.partition, tick.offset) == tick.partition


def _order(record: StoredRecord) -> tuple[int, int]:
    """Partition 0 before offset 5 (and 1) is the first step; the rest the second."""
    first = record.partition == 1 or (record.partition == 0 and record.offset < 5)
    return (0 if first else 1, record.offset)


def _truth() -> KeyTruth:
    records = [
        _record(2, 1, "p:3", 1_900),  # (in any order: the oracle sorts them)
        _record(0, 0, "p:1", 1_000),
        _record(0, 2, "p:2", 1_500),
    ]
    ticks = [
        _tick(2, 2, 20_000),
        _tick(0, 3, 2_600),
        _tick(1, 0, 9_000),  # where the key never lives
        _tick(0, 6, 9_000),  # in its partition after it left
        _tick(2, 0, 2_700),
        _tick(2, 3, 30_000),
    ]
    return oracle_of({KEY: records}, ticks, _takes, _order)[KEY]


def test_a_keys_sequence_is_its_records_and_the_ticks_where_it_lives_in_lineage_order() -> None:
    truth = _truth()
    assert truth.sequence == [
        (0, 0, "record"),
        (0, 2, "record"),
        (0, 3, "tick"),
        (2, 0, "tick"),
        (2, 1, "record"),
        (2, 2, "tick"),
        (2, 3, "tick"),
    ]
    assert truth.problems == []


def test_the_oracle_closes_windows_and_fires_timers_by_the_keys_time_and_its_ticks() -> None:
    outputs = [orjson.loads(value) for value in _truth().outputs]
    assert outputs == [
        ["ttl", "p", 1, None],
        ["ttl", "p", 2, "p:1"],
        ["window", "sums", 0, 2_000, 3],  # the tick at 2,600: past the end and grace
        # (the tick at 2,700 finds nothing due: the key's time stays at 2,600)
        ["ttl", "p", 3, "p:2"],
        ["late", "sums", "p", 3, 700],  # its window closed at the first tick
        ["window", "sessions", 1_000, 1_900, ["p:1", "p:2", "p:3"]],
        # the value expired at 5,100, before the timers fired
        ["timer", "quiet", 5_600, 20_000, 20_000, 3, None],
        # set at p:3, its wall timer counts from the next tick (20,000): due at 25,000
        ["timer", "idle", 25_000, 30_000, 30_000, 3, None],
    ]


def test_at_the_end_the_key_holds_its_time_and_nothing_due() -> None:
    stores = _truth().stores
    assert orjson.loads(stores["splitstate.time"] or b"") == {
        "f": 30_000,
        "p": 30_000,
        "t": {INPUT: 1_900},
    }
    assert stores["splitstate.due"] is None
    assert stores["recent"] is None


A, B, C = b'["ttl","p",1,null]', b'["window","sums",0,2000,3]', b'["ttl","p",2,"p:1"]'
TRUTHS = {KEY: KeyTruth(outputs=[A, B, C])}


def _problems(
    emitted: dict[bytes, list[str]], emitters: Emitters | None = None, *, complete: bool = True
) -> list[str]:
    found: list[str] = []
    emission_problems(
        {KEY: emitted}, TRUTHS, emitters or Emitters(), found.append, complete=complete
    )
    return found


def test_the_oracles_outputs_each_emitted_once_in_order_hold() -> None:
    assert _problems({A: ["x#1"], B: ["x#1"], C: ["x#1"]}) == []
    assert _problems({A: ["x#1"]}, complete=False) == []


def test_a_wrong_value_is_named_beside_the_oracles() -> None:
    (problem,) = _problems({A: ["x#1"], b'["window","sums",0,2000,4]': ["x#1"]}, complete=False)
    assert '["window","sums",0,2000,4]' in problem and B.decode() in problem


def test_a_missing_output_of_a_settled_world_is_a_problem() -> None:
    (problem,) = _problems({A: ["x#1"], C: ["x#1"]})
    assert "1 of the oracle's 3 outputs were never emitted" in problem


def test_a_repeat_needs_an_emitter_cut_short_and_never_under_exactly_once() -> None:
    repeated = {A: ["x#1", "y#2"], B: ["y#2"], C: ["y#2"]}
    assert "neither killed nor stopped" in _problems(repeated)[0]
    assert _problems(repeated, Emitters(cut_short={"x#1"})) == []
    twice = _problems(repeated, Emitters(cut_short={"x#1"}, exactly_once=True))
    assert "emitted 2 times" in twice[0]


def test_outputs_first_emitted_out_of_the_oracles_order_are_a_problem() -> None:
    assert "oracle's order [0, 2, 1]" in _problems({A: ["x#1"], C: ["x#1"], B: ["x#1"]})[0]


def test_event_times_are_the_same_on_every_run_and_only_the_inputs_records_have_them() -> None:
    delay = event_delays(7)
    delays = [delay(INPUT, b"k", f"p:{seq}".encode()) for seq in range(1, 400)]
    assert delays == [event_delays(7)(INPUT, b"k", f"p:{seq}".encode()) for seq in range(1, 400)]
    assert any(d >= LATE_MS[0] for d in delays)  # some late
    assert sum(d <= 20 for d in delays) > len(delays) // 2  # most in order
    assert delay("sim-out", b"k", b"p:1") == 0
    assert delay(INPUT, None, None) == 0
