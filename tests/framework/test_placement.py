"""A keyed record must sit where its `splitstate.count` header places it (the growth fence)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework import App, AppConfig, Output, Record
from framework.coordination.registry import Growth
from framework.growth.late import late_record
from framework.growth.placement import COUNT_HEADER, misplacement
from framework.processing import RecordProcessor, StoredMessage
from framework.testing import TestDriver
from rebalance import TopicHistory, bucket, key_hash
from statestore import DatabaseIdentity, KeyState, ProcessorDatabase

N = 4  # the input's initial partition count


def counting_app() -> App:
    app = App(
        AppConfig.load(
            None,
            app_id="placement",
            inputs=[{"topic": "in", "partitions": N}],
            outputs=[{"topic": "out", "partitions": N}],
            initial_processors=2,
        )
    )
    app.store("counts", int)

    @app.processor("in")
    def count(record: Record[bytes], state: KeyState[int]) -> Output:
        state.set((state.get() or 0) + 1)
        return Output(state.get())

    return app


def moved_key(count: int) -> bytes:
    """A key that ``count`` partitions place elsewhere than ``N`` do."""
    for i in range(1000):
        key = f"key-{i}".encode()
        if bucket(key_hash(key), N, count) != bucket(key_hash(key), N, N):
            return key
    raise AssertionError("no such key")


def test_a_record_on_another_partition_than_its_count_places_it_is_dead_lettered() -> None:
    driver = TestDriver(counting_app())
    key = moved_key(6)
    right = bucket(key_hash(key), N, 6)
    wrong = bucket(key_hash(key), N, N)
    driver.send("in", key, b"", [(COUNT_HEADER, b"6")], partition=wrong)
    (dead,) = driver.dead_letters
    assert dead.stage == "placement"
    assert dead.reason.startswith("misplaced")
    assert f"in[{right}]" in dead.reason and "6" in dead.reason
    assert (dead.partition, dead.offset) == (wrong, 0)
    assert driver.state("counts", key) is None  # state untouched, no output
    assert driver.outputs() == []
    assert driver.offsets() == {("in", wrong): 1}  # the record is done with
    driver.send("in", key, b"", [(COUNT_HEADER, b"6")], partition=right)
    assert driver.state("counts", key) == 1
    assert len(driver.dead_letters) == 1


def test_the_last_count_header_is_the_placement() -> None:
    # a function copying its input's headers into an output: the producer's own header is last
    driver = TestDriver(counting_app())
    key = moved_key(8)
    headers: list[tuple[str, bytes | None]] = [(COUNT_HEADER, b"4"), (COUNT_HEADER, b"8")]
    driver.send("in", key, b"", headers, partition=bucket(key_hash(key), N, 8))
    assert driver.dead_letters == []
    driver.send("in", key, b"", headers, partition=bucket(key_hash(key), N, N))
    assert [d.stage for d in driver.dead_letters] == ["placement"]


@pytest.mark.parametrize("count", [b"3", b"many", None])
def test_an_unusable_count_header_is_misplaced(count: bytes | None) -> None:
    driver = TestDriver(counting_app())
    driver.send("in", b"k", b"", [(COUNT_HEADER, count)])
    (dead,) = driver.dead_letters
    assert (dead.stage, dead.reason.split(":")[0]) == ("placement", "misplaced")
    assert driver.state("counts", b"k") is None


def test_records_without_the_header_are_processed_and_counted() -> None:
    driver = TestDriver(counting_app())
    key = moved_key(6)
    driver.send("in", key, b"")
    driver.send("in", key, b"", [("other", b"x")])
    driver.send("in", key, b"", [(COUNT_HEADER, b"4")])
    assert driver.dead_letters == []
    assert driver.state("counts", key) == 3
    assert driver.unfenced() == {("in", bucket(key_hash(key), N, N)): 2}
    driver.send("in", b"other-key", b"", partition=0)
    assert sum(driver.unfenced().values()) == 3


def test_markers_and_keyless_records_keep_their_handling() -> None:
    # a marker the registry does not record (none: the test driver has no registry) is a
    # dead letter too (test_untrusted_records.py has the cases)
    driver = TestDriver(counting_app())
    driver.send("in", None, None, [("splitstate.marker", b"{}"), (COUNT_HEADER, b"6")])
    assert [d.stage for d in driver.dead_letters] == ["placement"]
    assert driver.dead_letters[0].reason.startswith("unrecorded marker")
    driver.send("in", None, b"x", [(COUNT_HEADER, b"6")])
    assert [d.stage for d in driver.dead_letters] == ["placement", "decode"]


def test_restore_skips_a_misplaced_record_without_state_or_dead_letter() -> None:
    # the catch-up and the Spark fold rebuild state as the runtime built it
    app = counting_app()
    processor = RecordProcessor(app, {"in": N})
    database = ProcessorDatabase.in_memory(DatabaseIdentity("placement", 0), app.store_specs())
    key = moved_key(6)
    wrong = bucket(key_hash(key), N, N)
    message = StoredMessage("in", wrong, 0, key, b"", None, [(COUNT_HEADER, b"6")])
    batch = database.begin()
    assert processor.process(batch, message, restore=True) == ([], None)
    unheaded = StoredMessage("in", 1 - wrong % 2, 1, key, b"", None, None)  # where 4 never put it
    assert processor.process(batch, unheaded, restore=True) == ([], None)
    batch.commit()
    assert database.get("counts", key) is None  # neither: both were dead letters when processed
    assert processor.dead_letter_count == 2
    # restored records were counted when processed
    assert database.progress("unfenced") == database.progress("unplaced") == {}


def test_counts_of_aborted_batches_are_not_kept() -> None:
    app = counting_app()
    database = ProcessorDatabase.in_memory(DatabaseIdentity("placement", 0), app.store_specs())
    processor = RecordProcessor(app, {"in": N}, {("in", 1): 5})
    aborted = database.begin()
    processor.process(aborted, StoredMessage("in", 1, 0, b"k", b"", None, None))
    aborted.abort()
    for offset in (0, 1):
        committed = database.begin()
        processor.process(committed, StoredMessage("in", 1, offset, b"k", b"", None, None))
        committed.commit()
    assert database.progress("unfenced") == {("in", 1): 7}


@given(
    st.binary(max_size=24),
    st.integers(min_value=1, max_value=16),
    st.integers(min_value=0, max_value=40),
    st.integers(min_value=0, max_value=60),
)
def test_misplacement_agrees_with_bucket(key: bytes, initial: int, growth: int, at: int) -> None:
    count = initial + growth
    expected = bucket(key_hash(key), initial, count)
    for placed in (str(count), str(count).encode()):
        assert misplacement(key, "t", expected, initial, placed) is None
        reason = misplacement(key, "t", at, initial, placed)
        assert (reason is None) == (at == expected)
        if reason is not None:
            assert reason.startswith("misplaced") and f"t[{expected}]" in reason
    assert misplacement(key, "t", expected, initial, str(initial - 1)) is not None


def _grown(children_thresholds: dict[int, int], *counts: int) -> TopicHistory:
    return TopicHistory.of("in", [N, *counts], children_thresholds)


def test_a_record_placed_before_a_growth_that_landed_after_the_fence_is_dead_lettered() -> None:
    # a producer placed the key with 4 partitions, then paused longer than its lease; the
    # record landed in the parent after the marker of the child its key moved to
    app = counting_app()
    key = moved_key(6)
    child = bucket(key_hash(key), N, 6)
    parent_partition = bucket(key_hash(key), N, N)
    history = _grown({4: 10, 5: 12}, 6)
    marker = history.thresholds[child]
    processor = RecordProcessor(app, {"in": N}, histories={"in": history})
    database = ProcessorDatabase.in_memory(DatabaseIdentity("placement", 0), app.store_specs())
    batch = database.begin()
    before = StoredMessage(
        "in", parent_partition, marker - 1, key, b"", None, [(COUNT_HEADER, b"4")]
    )
    late = StoredMessage("in", parent_partition, marker + 1, key, b"", None, [(COUNT_HEADER, b"4")])
    assert processor.process(batch, before)[1] is None
    outputs, dead = processor.process(batch, late)
    batch.commit()
    assert outputs == [] and dead is not None
    assert dead.stage == "placement" and dead.reason.startswith("late")
    assert f"in[{child}]" in dead.reason and f"offset {marker}" in dead.reason
    assert database.get("counts", key) == 1  # only the record before the marker


def test_a_late_record_is_skipped_when_restored_too() -> None:
    # a rebuild (lost directory, catch-up of the whole parent) builds what the live run built
    app = counting_app()
    key = moved_key(6)
    parent_partition = bucket(key_hash(key), N, N)
    processor = RecordProcessor(app, {"in": N}, histories={"in": _grown({4: 10, 5: 12}, 6)})
    database = ProcessorDatabase.in_memory(DatabaseIdentity("placement", 0), app.store_specs())
    batch = database.begin()
    late = StoredMessage("in", parent_partition, 20, key, b"", None, [(COUNT_HEADER, b"4")])
    assert processor.process(batch, late, restore=True) == ([], None)
    batch.commit()
    assert database.get("counts", key) is None


def test_records_of_keys_that_stayed_and_growths_in_progress_are_not_late() -> None:
    app = counting_app()
    moved = moved_key(6)
    stayed = next(
        k
        for k in (f"key-{i}".encode() for i in range(1000))
        if bucket(key_hash(k), N, 6) == bucket(key_hash(k), N, N) == bucket(key_hash(moved), N, N)
    )
    parent_partition = bucket(key_hash(moved), N, N)
    unrecorded = RecordProcessor(app, {"in": N}, histories={"in": _grown({}, 6)})
    recorded = RecordProcessor(app, {"in": N}, histories={"in": _grown({4: 10, 5: 12}, 6)})
    database = ProcessorDatabase.in_memory(DatabaseIdentity("placement", 0), app.store_specs())
    batch = database.begin()
    for processor, key in ((unrecorded, moved), (recorded, stayed)):
        message = StoredMessage("in", parent_partition, 50, key, b"", None, [(COUNT_HEADER, b"4")])
        assert processor.process(batch, message)[1] is None
    batch.commit()
    assert database.get("counts", moved) == database.get("counts", stayed) == 1


def test_a_late_record_two_levels_down_is_late_where_its_key_no_longer_lives() -> None:
    # 4 -> 16 at once: a key now in a grandchild (13, split from the new 5, split from 1) is
    # late in 1 after 5's marker; in 5 it never lives (5 was created with 16 partitions, which
    # place it in 13), so a record of it there is late at any offset
    key = next(
        k for k in (f"key-{i}".encode() for i in range(5000)) if bucket(key_hash(k), N, 16) == 13
    )
    history = TopicHistory.of("in", [N, 16], {**dict.fromkeys(range(4, 16), 100), 5: 7})
    assert late_record(key, ("in", 1, 7), history) is None
    reason = late_record(key, ("in", 1, 8), history)
    assert reason is not None and reason.startswith("late: ")
    assert "in[13]" in reason and "16 partitions" in reason and "offset 7" in reason
    assert late_record(key, ("in", 5, 0), history) is not None
    assert late_record(key, ("in", 5, 101), history) is not None


def test_a_marker_met_before_the_registry_records_its_threshold_fences_its_partition() -> None:
    # the registry records the growth and its fence, not the threshold yet: the marker
    # itself says where the child's keys end in the parent
    app = counting_app()
    key = moved_key(6)
    child = bucket(key_hash(key), N, 6)
    parent_partition = bucket(key_hash(key), N, N)
    fenced = Growth(6, 0, fence_ends=dict.fromkeys(range(N), 1))
    processor = RecordProcessor(
        app, {"in": N}, histories={"in": _grown({}, 6)}, growths={"in": fenced}
    )
    database = ProcessorDatabase.in_memory(DatabaseIdentity("placement", 0), app.store_specs())
    batch = database.begin()
    placed: list[tuple[str, bytes | None]] = [(COUNT_HEADER, b"4")]
    marker: list[tuple[str, bytes | None]] = [("splitstate.marker", f"in/6/{child}".encode())]
    for offset, k, headers in ((0, key, placed), (1, None, marker), (2, key, placed)):
        message = StoredMessage("in", parent_partition, offset, k, b"", None, headers)
        processor.process(batch, message)
    batch.commit()
    assert database.get("counts", key) == 1  # the record after the marker was late
    assert processor.dead_letter_count == 1


def key_in(partition: int, count: int, *, not_at: tuple[int, ...] = ()) -> bytes:
    """A key ``count`` partitions place in ``partition`` (and no count of ``not_at`` does)."""
    for i in range(5000):
        key = f"key-{i}".encode()
        h = key_hash(key)
        if bucket(h, N, count) == partition and all(bucket(h, N, c) != partition for c in not_at):
            return key
    raise AssertionError("no such key")


def test_a_record_without_the_header_that_no_count_places_there_is_dead_lettered() -> None:
    # a plain producer (Kafka's default partitioner) put the key on another partition
    driver = TestDriver(counting_app())
    key = key_in(1, N)
    driver.send("in", key, b"", partition=2)
    (dead,) = driver.dead_letters
    assert (dead.stage, dead.partition, dead.offset) == ("placement", 2, 0)
    assert dead.reason.startswith("misplaced: no splitstate.count header"), dead.reason
    for words in ("in[1]", "Kafka's default partitioner", "SplitstateProducer", "same hash"):
        assert words in dead.reason, (words, dead.reason)
    assert driver.state("counts", key) is None and driver.outputs() == []
    assert driver.offsets() == {("in", 2): 1}
    assert driver.database.progress("unplaced") == {("in", 2): 1}
    assert driver.unfenced() == {}
    driver.send("in", key, b"")  # where linear hashing places it: processed
    assert driver.state("counts", key) == 1
    assert driver.unfenced() == {("in", 1): 1}


def test_without_the_header_any_count_in_the_history_places_a_key() -> None:
    # 4 -> 6 -> 8: a key now in 7 was placed in 3 by 4 and 6 partitions; in 7 by 8. Partition
    # 5 holds keys of 1; the key of 13 (4 -> 16) passes through 5, which no count of [4, 16]
    # places it in.
    app = counting_app()
    database = ProcessorDatabase.in_memory(DatabaseIdentity("placement", 0), app.store_specs())
    grown = TopicHistory.of("in", [N, 6, 8], {4: 10, 5: 10, 6: 10, 7: 10})
    processor = RecordProcessor(app, {"in": N}, histories={"in": grown})
    key = key_in(7, 8)
    batch = database.begin()
    for partition, offset, placed in ((3, 0, True), (7, 0, True), (1, 0, False), (5, 0, False)):
        _outputs, dead = processor.process(
            batch, StoredMessage("in", partition, offset, key, b"", None, None)
        )
        assert (dead is None) == placed, (partition, dead)
    batch.commit()
    assert database.get("counts", key) == 2
    assert database.progress("unplaced") == {("in", 1): 1, ("in", 5): 1}
    at_once = RecordProcessor(app, {"in": N}, histories={"in": TopicHistory.of("in", [N, 16])})
    deep = key_in(13, 16)
    batch = database.begin()
    found = [
        at_once.process(batch, StoredMessage("in", p, 0, deep, b"", None, None))[1] is None
        for p in (1, 5, 13)
    ]
    batch.abort()
    assert found == [True, False, True]


def test_a_record_without_the_header_past_its_growth_fence_is_late() -> None:
    # a plain producer placing keys by linear hashing, but with a count from before the growth
    app = counting_app()
    key = key_in(5, 6)
    history = _grown({4: 10, 5: 12}, 6)
    processor = RecordProcessor(app, {"in": N}, histories={"in": history})
    database = ProcessorDatabase.in_memory(DatabaseIdentity("placement", 0), app.store_specs())
    batch = database.begin()
    assert processor.process(batch, StoredMessage("in", 1, 12, key, b"", None, None))[1] is None
    _outputs, dead = processor.process(batch, StoredMessage("in", 1, 13, key, b"", None, None))
    batch.commit()
    assert dead is not None and dead.stage == "placement"
    assert dead.reason.startswith("late: no splitstate.count header"), dead.reason
    assert "in[5]" in dead.reason and "offset 12" in dead.reason
    assert "SplitstateProducer" in dead.reason
    assert database.get("counts", key) == 1
    assert database.progress("unplaced") == {("in", 1): 1}


@given(
    st.binary(max_size=24),
    st.integers(min_value=1, max_value=8),
    st.lists(st.integers(min_value=1, max_value=20), max_size=3),
    st.integers(min_value=0, max_value=70),
)
def test_without_the_header_a_key_is_placed_where_some_count_of_the_history_puts_it(
    key: bytes, initial: int, steps: list[int], at: int
) -> None:
    counts = [initial]
    for step in steps:
        counts.append(counts[-1] + step)
    app = App(
        AppConfig.load(
            None,
            app_id="placement",
            inputs=[{"topic": "in", "partitions": initial}],
            initial_processors=1,
        )
    )
    app.store("counts", int)
    app.processor("in")(lambda _record, state: state.set((state.get() or 0) + 1))
    processor = RecordProcessor(
        app, {"in": initial}, histories={"in": TopicHistory.of("in", counts)}
    )
    database = ProcessorDatabase.in_memory(DatabaseIdentity("placement", 0), app.store_specs())
    batch = database.begin()
    _outputs, dead = processor.process(batch, StoredMessage("in", at, 0, key, b"", None, None))
    batch.abort()
    placed = any(bucket(key_hash(key), initial, count) == at for count in counts)
    assert (dead is None) == placed, (counts, at, dead)
