"""Adversarial review of the joins (issue 36 §3), session 11: each defect found as a strict
``xfail`` naming it, reproduced through ``TestDriver``."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from framework import App, AppConfig, Output, Record
from framework.config import TopicConfig
from framework.config_time import TimeConfig
from framework.errors import ProcessorStoppedError
from framework.joins import DamagedJoinError, JoinBuffer
from framework.testing import TestDriver
from statestore.batch import StoreBatch
from tests.framework.joins.join_world import join_app, pairs, send
from tests.framework.joins.test_table_join import limits_app

STORE = "splitstate.join.match"


def failing_app(fail_on: int, how: str = "left") -> App:
    """The join world's app, but its function raises for payment ``fail_on`` alone."""
    app = App(
        AppConfig(
            app_id="joins",
            inputs=[TopicConfig(topic=t, partitions=2) for t in ("payments", "orders")],
            outputs=[TopicConfig(topic="matched", partitions=2)],
            initial_processors=1,
            time=TimeConfig(input_order="canonical"),
        )
    )

    @app.interval_join("payments", "orders", before=100, how=how, left_type=dict, right_type=dict)  # type: ignore[arg-type]
    def match(left: Record[Any] | None, right: Record[Any] | None) -> Output:
        if left is not None and left.value["n"] == fail_on and right is None:
            raise RuntimeError("no")
        return Output({"l": left and left.value["n"], "r": right and right.value["n"]})

    return app


def put(driver: TestDriver, store: str, key: bytes, value: bytes) -> None:
    """Write ``value`` as ``key``'s in ``store`` (damaged state, as a foreign file holds)."""
    batch = driver.database.begin()
    batch.store(store).set(key, value)
    batch.commit()


# -- interval join: a failing unmatched call ---------------------------------------------


def test_a_failing_unmatched_call_strands_neither_the_buffer_nor_the_other_records() -> None:
    driver = TestDriver(failing_app(fail_on=1), on_error="dead-letter")
    send(driver, [("payments", b"k0", 1_000, 1), ("payments", b"k0", 1_000, 2)])
    driver.advance_time(1_000_000)
    assert [letter.stage for letter in driver.dead_letters] == ["timer"]
    assert pairs(driver) == [(2, None)]
    assert driver.state(STORE, b"k0") is None


def test_a_key_whose_unmatched_call_failed_once_does_not_grow_for_ever() -> None:
    driver = TestDriver(failing_app(fail_on=1), on_error="dead-letter")
    send(driver, [("payments", b"k0", 1_000, 1)])
    for n in range(2, 42):
        at = 1_000 + 1_000 * n  # each far past the window of the one before
        send(driver, [("payments", b"k0", at, n)])
        driver.advance_time(at)
    stored = driver.state(STORE, b"k0")
    buffered = [] if stored is None else orjson.loads(stored)["l"]
    assert len(buffered) <= 2
    assert len(pairs(driver)) >= 39  # (each of payments 2..40 alone, once its window passed)


# -- interval join: damaged stored buffers -----------------------------------------------


def test_a_buffered_value_that_is_no_base64_is_a_damaged_buffer() -> None:
    with pytest.raises(DamagedJoinError):
        JoinBuffer.decode(b'{"l":[[1000,0,0,null,{"b64":"!!"},0]]}')


def test_a_damaged_buffer_is_a_decode_dead_letter_naming_the_fix() -> None:
    driver = TestDriver(join_app("left"), on_error="dead-letter")
    send(driver, [("payments", b"k0", 1_000, 1)])
    driver.advance_time(1_000)  # (applied and buffered: nothing waits)
    put(driver, STORE, b"k0", b"{no json")
    send(driver, [("orders", b"k0", 1_000, 2)])
    driver.advance_time(1_000)
    assert driver.dead_letters  # (the order, and the expiry timer a forced tick fired)
    for letter in driver.dead_letters:
        assert letter.stage == "decode"
        assert "backfill" in letter.reason or "snapshot" in letter.reason


# -- table join -------------------------------------------------------------------------


def test_a_damaged_other_table_is_no_silently_skipped_join() -> None:
    driver = TestDriver(limits_app("inner"), on_error="dead-letter")
    driver.send("limits", b"c1", {"amount": 100}, timestamp=1_000)
    driver.advance_time(1_500)
    put(driver, "splitstate.table.limits", b"c1", b"{no json")
    driver.send("customers", b"c1", {"name": "Ada"}, timestamp=2_000)
    driver.advance_time(3_000)
    assert driver.output_values() or driver.dead_letters


def test_an_other_tables_value_that_no_longer_validates_is_a_dead_letter() -> None:
    driver = TestDriver(limits_app("inner"), on_error="dead-letter")
    driver.send("limits", b"c1", {"amount": 100}, timestamp=1_000)
    driver.advance_time(1_500)
    put(
        driver,
        "splitstate.table.limits",
        b"c1",
        b'{"t":1000,"v":[[1000,"{\\"amount\\":\\"x\\"}"]]}',
    )
    driver.send("customers", b"c1", {"name": "Ada"}, timestamp=2_000)
    driver.advance_time(3_000)
    assert [letter.stage for letter in driver.dead_letters] == ["decode"]


@pytest.mark.parametrize("how", ["left", "outer"])
def test_a_tombstone_of_a_key_neither_table_holds_calls_nothing(how: str) -> None:
    driver = TestDriver(limits_app(how), on_error="dead-letter")  # type: ignore[arg-type]
    driver.send("customers", b"c9", None, timestamp=1_000)
    driver.advance_time(5_000)
    assert driver.output_values() == []


# -- refusals --------------------------------------------------------------------------


def test_a_second_join_of_an_input_is_refused_naming_the_first_join() -> None:
    app = join_app()
    with pytest.raises(ValueError, match="match"):

        @app.interval_join("payments", "orders", before=10, name="again")
        def again(left: Any, right: Any) -> None:
            return None


def test_a_processor_for_a_joined_input_is_refused_naming_the_join() -> None:
    app = join_app()
    with pytest.raises(ValueError, match=r"interval join 'match'.*Fix"):

        @app.processor("orders")
        def orders(record: Any, state: Any) -> None:
            return None


# -- cost ------------------------------------------------------------------------------


@pytest.mark.xfail(
    strict=True,
    reason="framework/joins/interval.py (JoinSide/_save): each record decodes and rewrites "
    "the key's whole buffer as one JSON value, so the bytes written per record grow with the "
    "buffer (a key with many records in a long window costs O(n) per record, O(n^2) in all). "
    "Not fixed yet: statestore keeps one value per user key (a stored key is the bucket prefix "
    "of the key's hash + the key), with no entries under a key's range to write one at a time; "
    "window state too lives in the key's one time record",
)
def test_the_bytes_written_per_record_do_not_grow_with_the_buffer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    written: list[int] = []
    original = StoreBatch.set

    def counting(self: StoreBatch[Any], key: bytes, value: Any) -> None:
        if self.name == STORE:
            written.append(len(value))
        original(self, key, value)

    monkeypatch.setattr(StoreBatch, "set", counting)
    driver = TestDriver(join_app("inner", before=0, after=3_600_000))
    for n in range(1, 201):  # 200 payments of a key within an hour: all stay buffered
        send(driver, [("payments", b"k0", 1_000 + n, n)])
    driver.advance_time(1_201)
    assert len(written) == 200
    assert written[-1] <= 10 * written[0]


# -- the harness: TestDriver going on from a state ----------------------------------------


def test_a_driver_going_on_after_advance_time_applies_what_one_run_applies() -> None:
    def app() -> App:
        return join_app(before=30, after=30, grace=5)

    first = [("orders", b"k1", 1_025, 1), ("payments", b"k0", 1_077, 2)]
    rest = [("orders", b"k1", 1_070, 3)]
    whole = send(TestDriver(app(), on_error="dead-letter"), first)
    whole.advance_time(977)
    send(whole, rest).advance_time(10_000)
    before = send(TestDriver(app(), on_error="dead-letter"), first)
    before.advance_time(977)
    assert before.pending == 0  # (nothing waits that pending counts)
    after = TestDriver(app(), database=before.database, on_error="dead-letter")
    send(after, rest).advance_time(10_000)
    late = [(d.topic, d.stage) for d in before.dead_letters + after.dead_letters]
    assert late == [(d.topic, d.stage) for d in whole.dead_letters]


def test_records_near_the_largest_event_time_are_joined() -> None:
    at = 2**62 - 1 - 5
    driver = TestDriver(join_app("left", before=100, after=50, grace=20), on_error="dead-letter")
    send(driver, [("payments", b"k0", at, 1), ("orders", b"k0", at, 2)])
    driver.advance_time(at + 2)
    assert driver.dead_letters == []
    assert pairs(driver) == [(1, 2)]


def test_a_failing_unmatched_call_stops_a_processor_set_to_stop() -> None:
    driver = TestDriver(failing_app(fail_on=1))  # (a failure raises: on_error stop)
    send(driver, [("payments", b"k0", 1_000, 1), ("payments", b"k0", 1_000, 2)])
    with pytest.raises(ProcessorStoppedError, match=r"unmatched record payments\[0\]@0"):
        driver.advance_time(1_000_000)
    assert pairs(driver) == []  # (nothing of the expiry kept: it is applied again on restart)
    assert driver.state(STORE, b"k0") is not None
