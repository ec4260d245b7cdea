"""Compaction-only tombstones on the processing side (issue 34, compacted inputs).

A keyed record with no value and one ``splitstate.compaction`` header ``<topic>/<step>`` is
written by splitstate's producers to a key's earlier partition of a compacted input, only for
Kafka's log cleaner. Every path that folds records skips it before the placement check (it
sits where its key no longer belongs): no state change, no output, no dead letter, and the
offset advances. With a value, or a header of another shape, it is a dead letter (stage
``placement``) and never a delete. A genuine tombstone (no such header) still reaches the
function. (On a real broker, with the log cleaner: tests/integration/test_compacted_history.py.)
"""

from __future__ import annotations

import pytest

from framework import App, AppConfig, Output, Record
from framework.bootstrap.fold import AppFold
from framework.growth.compaction import (
    COMPACTION_HEADER,
    compaction_header,
    compaction_step,
    is_compaction_tombstone,
)
from framework.growth.placement import COUNT_HEADER
from framework.processing import RecordProcessor, StoredMessage
from framework.testing import TestDriver
from rebalance import bucket, key_hash
from statestore import DatabaseIdentity, KeyState, ProcessorDatabase, TypedCodec
from tests.framework.test_spark_fold import records_table

TOPIC = "table"
N = 2

Headers = list[tuple[str, bytes | None]]


def latest_value_app() -> App:
    """A changelog table: the latest value per key, a tombstone deletes it."""
    app = App(
        AppConfig.load(
            None,
            app_id="compacted",
            inputs=[{"topic": TOPIC, "partitions": N}],
            outputs=[{"topic": "out", "partitions": N}],
            initial_processors=1,
        )
    )
    app.store("latest", bytes)

    @app.processor(TOPIC)
    def latest(record: Record[bytes | None], state: KeyState[bytes]) -> Output:
        if record.value is None:
            state.delete()
        else:
            state.set(record.value)
        return Output(record.value)

    return app


def key_on(partition: int, count: int = N) -> bytes:
    """A key that ``count`` partitions place on ``partition``."""
    for i in range(1000):
        key = f"k-{i}".encode()
        if bucket(key_hash(key), N, count) == partition:
            return key
    raise AssertionError("no such key")


def tombstone_headers(step: int = 1) -> Headers:
    return [compaction_header(TOPIC, step), (COUNT_HEADER, b"4")]


def test_a_compaction_tombstone_is_skipped_where_its_key_no_longer_belongs() -> None:
    driver = TestDriver(latest_value_app())
    key = key_on(0)
    driver.send(TOPIC, key, b"v1", [(COUNT_HEADER, b"2")])
    # the key's old home after a growth to 4, or any other partition: never a dead letter
    for partition in (0, 1):
        driver.send(TOPIC, key, None, tombstone_headers(), partition=partition)
    assert driver.state("latest", key) == b"v1"
    assert driver.outputs() == [driver.outputs()[0]]  # only v1's
    assert driver.dead_letters == []
    assert driver.offsets() == {(TOPIC, 0): 2, (TOPIC, 1): 1}
    assert driver.unfenced() == {}  # counted nowhere: it is no record of the app's


def test_a_genuine_tombstone_still_deletes() -> None:
    driver = TestDriver(latest_value_app())
    key = key_on(1)
    driver.send(TOPIC, key, b"v1", [(COUNT_HEADER, b"2")])
    driver.send(TOPIC, key, None, [(COUNT_HEADER, b"2")])
    assert driver.state("latest", key) is None
    assert [o.value for o in driver.outputs()] == [b"v1", None]
    assert driver.dead_letters == []


def test_a_compaction_header_with_a_value_is_a_dead_letter_and_changes_nothing() -> None:
    driver = TestDriver(latest_value_app())
    key = key_on(0)
    driver.send(TOPIC, key, b"v1", [(COUNT_HEADER, b"2")])
    driver.send(TOPIC, key, b"v2", tombstone_headers())
    (letter,) = driver.dead_letters
    assert letter.stage == "placement"
    assert letter.reason.startswith("compaction tombstone with a value:"), letter.reason
    assert "Fix:" in letter.reason and COMPACTION_HEADER in letter.reason
    assert letter.value == b"v2"
    assert driver.state("latest", key) == b"v1"
    assert driver.offsets() == {(TOPIC, 0): 2}


@pytest.mark.parametrize(
    "headers",
    [
        [(COMPACTION_HEADER, b"other/1")],
        [(COMPACTION_HEADER, b"table")],
        [(COMPACTION_HEADER, b"table/")],
        [(COMPACTION_HEADER, b"table/x")],
        [(COMPACTION_HEADER, b"table/-1")],
        [(COMPACTION_HEADER, b"\xff/1")],
        [(COMPACTION_HEADER, None)],
        [(COMPACTION_HEADER, b"table/1"), (COMPACTION_HEADER, b"table/2")],
    ],
)
def test_a_malformed_compaction_header_is_a_dead_letter_never_a_delete(headers: Headers) -> None:
    driver = TestDriver(latest_value_app())
    key = key_on(0)
    driver.send(TOPIC, key, b"v1", [(COUNT_HEADER, b"2")])
    driver.send(TOPIC, key, None, [*headers, (COUNT_HEADER, b"2")])
    (letter,) = driver.dead_letters
    assert letter.stage == "placement"
    assert letter.reason.startswith("malformed compaction tombstone:"), letter.reason
    assert f"{TOPIC}/<step>" in letter.reason and "Fix:" in letter.reason
    assert driver.state("latest", key) == b"v1"  # not deleted


def test_restore_mode_skips_it_as_well() -> None:
    app = latest_value_app()
    processor = RecordProcessor(app, {TOPIC: N})
    database = ProcessorDatabase.in_memory(DatabaseIdentity("compacted", 0), app.store_specs())
    key = key_on(0)
    batch = database.begin()
    records = [
        StoredMessage(TOPIC, 0, 0, key, b"v1", None, [(COUNT_HEADER, b"2")]),
        StoredMessage(TOPIC, 1, 0, key, None, None, tombstone_headers()),
        StoredMessage(TOPIC, 0, 1, key, None, None, tombstone_headers()),
    ]
    for message in records:
        for restore in (True, False):
            assert processor.process(batch, message, restore=restore)[1] is None
    batch.commit()
    assert database.get("latest", key) == b"v1"
    assert processor.dead_letter_count == 0


def test_the_spark_fold_skips_it() -> None:
    app = latest_value_app()
    kept, deleted = key_on(0), key_on(1)
    count = [{"key": COUNT_HEADER, "value": b"2"}]
    tombstone = [{"key": name, "value": value} for name, value in tombstone_headers()]
    table = records_table(
        [
            (TOPIC, 0, 0, kept, b"v1", None, count),
            (TOPIC, 1, 0, deleted, b"w1", None, count),
            (TOPIC, 1, 1, kept, None, None, tombstone),  # not its partition: skipped
            (TOPIC, 0, 1, kept, None, None, tombstone),  # its partition: skipped too
            (TOPIC, 1, 2, deleted, None, None, count),  # a genuine delete
        ]
    )
    fold = AppFold(app, {TOPIC: N})
    folded = [TypedCodec(bytes).decode(raw) for _store, _key, raw in fold(table)]
    assert folded == [b"v1"]
    assert fold.dead_letters == 0


def test_the_header_round_trips() -> None:
    name, value = compaction_header("orders.v2", 3)
    assert name == COMPACTION_HEADER and value == b"orders.v2/3"
    assert compaction_step("orders.v2", [(name, value)]) == 3
    assert is_compaction_tombstone("orders.v2", [(name, value)], None)
    assert not is_compaction_tombstone("orders.v2", [(name, value)], b"x")
    assert not is_compaction_tombstone("orders", [(name, value)], None)
    assert not is_compaction_tombstone("orders.v2", [], None)
