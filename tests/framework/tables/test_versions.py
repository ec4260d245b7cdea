"""A key's versions of a table (``framework.tables.versions``): upserts, tombstones, as-of
reads in and out of history, pruning by the key's table time, and the stored form."""

from __future__ import annotations

import pytest

from framework.tables import DamagedTableError, Versions


def applied(*records: tuple[int, bytes | None], history: int) -> Versions:
    versions = Versions()
    for at, raw in records:
        versions.upsert(at, raw, history)
    return versions


def test_history_zero_keeps_the_version_applied_last_whatever_its_time() -> None:
    versions = applied((100, b"a"), (200, b"b"), (150, b"c"), history=0)
    assert versions.items == [(150, b"c")]
    assert versions.time == 200
    assert versions.latest() == b"c"
    assert versions.at(200, 0) == b"c"
    assert versions.at(199, 0) is None  # older than the horizon (time - 0)


def test_history_zero_tombstone_deletes_the_record() -> None:
    versions = applied((100, b"a"), (200, None), history=0)
    assert versions.items == []
    assert versions.encode() is None
    assert versions.latest() is None


def test_as_of_reads_pick_the_newest_version_at_or_before() -> None:
    versions = applied((100, b"a"), (300, b"c"), (200, b"b"), history=1_000)
    assert versions.items == [(100, b"a"), (200, b"b"), (300, b"c")]
    assert versions.at(99, 1_000) is None  # none then
    assert versions.at(100, 1_000) == b"a"
    assert versions.at(250, 1_000) == b"b"
    assert versions.at(10_000, 1_000) == b"c"
    assert versions.latest() == b"c"


def test_a_record_at_a_kept_time_replaces_that_version() -> None:
    versions = applied((100, b"a"), (100, b"b"), history=1_000)
    assert versions.items == [(100, b"b")]


def test_a_tombstone_is_a_version_older_reads_still_see_the_value() -> None:
    versions = applied((100, b"a"), (200, None), history=1_000)
    assert versions.at(150, 1_000) == b"a"
    assert versions.at(200, 1_000) is None
    assert versions.latest() is None
    restored = Versions.decode(versions.encode())
    assert restored.items == versions.items and restored.time == 200


def test_pruning_keeps_the_newest_version_at_or_before_the_horizon() -> None:
    versions = applied((100, b"a"), (200, b"b"), (300, b"c"), (1_250, b"d"), history=1_000)
    # horizon 250: 100 goes, 200 stays (still the answer at 250), 300 and 1250 stay
    assert versions.items == [(200, b"b"), (300, b"c"), (1_250, b"d")]
    assert versions.at(250, 1_000) == b"b"
    assert versions.at(249, 1_000) is None  # out of history


def test_a_tombstone_older_than_the_horizon_goes() -> None:
    versions = applied((100, b"a"), (200, None), (2_000, b"b"), history=1_000)
    assert versions.items == [(2_000, b"b")]
    assert versions.at(1_500, 1_000) is None  # (deleted then: the same answer)


def test_a_record_older_than_the_horizon_is_dropped() -> None:
    versions = applied((2_000, b"b"), (500, b"a"), history=1_000)
    assert versions.items == [(2_000, b"b")]
    versions.upsert(1_000, b"x", 1_000)  # (at the horizon: kept)
    assert versions.items == [(1_000, b"x"), (2_000, b"b")]
    versions.upsert(1_500, b"y", 1_000)  # (1000 stays: still the answer at the horizon)
    assert versions.items == [(1_000, b"x"), (1_500, b"y"), (2_000, b"b")]
    versions.upsert(2_500, b"z", 1_000)  # horizon 1500: 1500 answers there, 1000 goes
    assert versions.items == [(1_500, b"y"), (2_000, b"b"), (2_500, b"z")]


def test_pruning_depends_only_on_the_keys_own_table_time() -> None:
    """The same records in any order leave the same versions once none is dropped."""
    records = [(100, b"a"), (400, b"b"), (300, None), (200, b"c")]
    first = applied(*records, history=1_000)
    second = applied(*reversed(records), history=1_000)
    assert first.items == second.items and first.time == second.time == 400


def test_values_that_are_no_text_are_stored_as_base64() -> None:
    versions = applied((1, b"\xff\x00"), (2, "é".encode()), history=10)
    encoded = versions.encode()
    assert encoded is not None and b'"b64"' in encoded
    assert Versions.decode(encoded).items == versions.items


def test_a_delete_of_a_key_with_no_version_stores_nothing() -> None:
    versions = applied((200, None), history=1_000)
    assert versions.encode() is None


def test_a_deleted_keys_record_goes_once_a_later_record_moves_its_horizon_past_it() -> None:
    versions = applied((100, b"a"), (200, None), history=1_000)
    assert versions.encode() is not None  # (within history: older reads see the value)
    versions.upsert(1_100, None, 1_000)  # horizon 100: the value still answers there
    assert versions.encode() is not None
    versions.upsert(1_200, None, 1_000)  # horizon 200: deleted then, only tombstones left
    assert versions.encode() is None


def test_a_tombstone_without_a_time_deletes_as_of_the_table_time() -> None:
    versions = applied((100, b"a"), (300, b"b"), (200, b"c"), history=1_000)
    versions.upsert(None, None, 1_000)
    assert versions.time == 300
    assert versions.items == [(100, b"a"), (200, b"c"), (300, None)]
    assert versions.at(250, 1_000) == b"c" and versions.latest() is None
    nothing = Versions()
    nothing.upsert(None, None, 1_000)
    assert nothing.time is None and nothing.encode() is None
    only = applied((100, b"a"), history=0)
    only.upsert(None, None, 0)
    assert only.time == 100 and only.encode() is None


def test_a_timeless_value_is_refused() -> None:
    with pytest.raises(ValueError, match="only a tombstone"):
        Versions().upsert(None, b"a", 1_000)


@pytest.mark.parametrize(
    "stored",
    [
        b"[]",
        b'{"t": 1, "v": [[1.5, "a"]]}',
        b"not json",
        b'{"t": "x", "v": [[1, "a"]]}',  # (a table time that is no int)
        b'{"t": 300, "v": [[300, "a"], [100, "b"]]}',  # (not in time order)
        b'{"t": 300, "v": [[100, "a"], [100, "b"]]}',  # (two at one time)
        b'{"t": 100, "v": [[100, "a"], [200, "b"]]}',  # (a version above the table time)
    ],
)
def test_a_damaged_record_is_told(stored: bytes) -> None:
    with pytest.raises(DamagedTableError):
        Versions.decode(stored)
