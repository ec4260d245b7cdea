"""Marker ids that name their step (issue 34): growth markers ``topic/step/count/child``,
drain markers ``topic/step/count/deleted/drain``, and the ids without a step written before
(``topic/count/child``), still taken for the growths of an old registry. A marker counts only
when the registry records its step, as for growth markers before."""

from __future__ import annotations

import pytest

from framework.coordination.registry import Growth
from framework.growth.markers import (
    MARKER_HEADER,
    MarkerName,
    is_marker_record,
    marker_growth,
    marker_key,
    marker_step,
    unrecorded_marker,
)
from framework.processing import RecordProcessor, StoredMessage
from rebalance import Grow, Shrink, TopicHistory
from tests.framework.test_record_headers import TOPIC, counting_app, database

# in: 4 -> 8 -> 5 -> 7 -> 4 -> 6; every step recorded
HISTORY = TopicHistory(
    TOPIC,
    (4, 8, 5, 7, 4, 6),
    (
        Grow(8, {4: 0, 5: 0, 6: 0, 7: 0}, {4: 10, 5: 11, 6: 12, 7: 13}),
        Shrink(5, {1: 20, 2: 21, 3: 22}, {5: 30, 6: 31, 7: 32}),
        Grow(7, {5: 33, 6: 34}, {5: 40, 6: 41}),
        Shrink(4, {0: 50, 1: 51, 2: 52}, {4: 60, 5: 61, 6: 62}),
        Grow(6, {4: 63, 5: 64}, {4: 70, 5: 71}),
    ),
)
#: the shrink 6 -> 5 recorded, its drain marker not yet
SHRINKING = TopicHistory(
    TOPIC, (4, 6, 5), (Grow(6, {4: 0, 5: 0}, {4: 10, 5: 11}), Shrink(5, {1: 20}))
)


def header(value: bytes) -> list[tuple[str, bytes | None]]:
    return [(MARKER_HEADER, value)]


@pytest.mark.parametrize(
    ("value", "name"),
    [
        (b"in/1/8/4", MarkerName(8, 4, 1)),
        (b"in/2/5/6/drain", MarkerName(5, 6, 2, drain=True)),
        (b"in/8/4", MarkerName(8, 4)),  # written before ids named their step
        (b"in/8/4/drain", None),  # a drain marker always names its step
        (b"in/1/8/4/x", None),
        (b"in/1/8/4/drain/", None),
        (b"in/8", None),
        (b"other/1/8/4", None),
        (b"in/1/-8/4", None),
        (b"in//8/4", None),
    ],
)
def test_a_marker_header_is_read_as_the_step_it_names(
    value: bytes, name: MarkerName | None
) -> None:
    assert marker_growth(TOPIC, header(value)) == name
    if name is not None:
        assert name.marker_id(TOPIC).encode() == value


def test_an_id_without_a_step_is_the_first_growth_to_its_count() -> None:
    assert marker_step(HISTORY, MarkerName(8, 4)) == 1
    assert marker_step(HISTORY, MarkerName(7, 5)) == 3
    assert marker_step(HISTORY, MarkerName(6, 4)) == 5
    assert marker_step(HISTORY, MarkerName(5, 5, 2, drain=True)) == 2
    assert marker_step(HISTORY, MarkerName(5, 5, 3, drain=True)) is None  # step 3 grew
    assert marker_step(HISTORY, MarkerName(7, 5, 1)) is None  # step 1 went to 8


def test_a_marker_key_only_on_a_compacted_topic() -> None:
    assert marker_key("in/2/5/5/drain", compacted=True) == b"in/2/5/5/drain"
    assert marker_key("in/2/5/5/drain", compacted=False) is None


@pytest.mark.parametrize(
    ("history", "change", "where", "value", "refused"),
    [
        # growth markers of each growth, in the partition each grew from
        (HISTORY, None, 0, b"in/1/8/4", None),
        (HISTORY, None, 1, b"in/3/7/5", None),
        (HISTORY, None, 0, b"in/5/6/4", None),
        (HISTORY, None, 0, b"in/8/4", None),  # an old id of the first growth to 8
        (HISTORY, None, 1, b"in/3/7/4", "created partitions 5..6"),
        (HISTORY, None, 2, b"in/3/7/5", "split from in[1], not from in[2]"),
        (HISTORY, None, 0, b"in/2/8/4", "does not record"),  # step 2 is a shrink to 5
        (HISTORY, None, 0, b"in/9/8/4", "does not record"),
        # drain markers, each in its deleted partition
        (HISTORY, None, 5, b"in/2/5/5/drain", None),
        (HISTORY, None, 6, b"in/4/4/6/drain", None),
        (HISTORY, None, 1, b"in/2/5/5/drain", "belongs in in[5], not in in[1]"),
        (HISTORY, None, 4, b"in/2/5/4/drain", "deleted partitions 5..7"),
        (HISTORY, None, 5, b"in/3/7/5/drain", "does not record"),  # step 3 grew
        # a shrink in progress: its drain marker counts once its fence is recorded
        (SHRINKING, Growth(5, 0, {5: 9}, kind="shrink"), 5, b"in/2/5/5/drain", None),
        (SHRINKING, Growth(5, 0, kind="shrink"), 5, b"in/2/5/5/drain", "not yet its fence"),
        (SHRINKING, None, 5, b"in/2/5/5/drain", "not yet its fence"),
        (SHRINKING, Growth(5, 0, {5: 9}), 5, b"in/2/5/5/drain", "not yet its fence"),  # a grow
    ],
)
def test_a_marker_counts_only_when_the_registry_records_its_step(
    history: TopicHistory,
    change: Growth | None,
    where: int,
    value: bytes,
    refused: str | None,
) -> None:
    reason = unrecorded_marker((TOPIC, where, 100), header(value), history, change)
    if refused is None:
        assert reason is None
    else:
        assert reason is not None and reason.startswith("unrecorded marker:"), reason
        assert refused in reason, reason
        assert "Fix:" in reason


def test_an_old_id_names_the_first_growth_to_its_count_and_a_new_one_its_own() -> None:
    # 4 -> 6 -> 4 -> 6 with the second growth in progress: `in/6/4` names the first one,
    # recorded (so it fences at the first growth's recorded marker); `in/3/6/4` the second
    history = TopicHistory(
        TOPIC,
        (4, 6, 4, 6),
        (
            Grow(6, {4: 0, 5: 0}, {4: 10, 5: 11}),
            Shrink(4, {0: 20, 1: 21}, {4: 30, 5: 31}),
            Grow(6, {4: 32, 5: 33}),
        ),
    )
    fenced = Growth(6, 0, {0: 40, 1: 41})
    assert unrecorded_marker((TOPIC, 0, 45), header(b"in/3/6/4"), history, fenced) is None
    assert marker_step(history, MarkerName(6, 4)) == 1  # the first growth: recorded
    assert unrecorded_marker((TOPIC, 0, 45), header(b"in/6/4"), history, fenced) is None
    in_progress = TopicHistory(TOPIC, (4, 6), (Grow(6, {4: 0, 5: 0}),))
    assert unrecorded_marker((TOPIC, 0, 45), header(b"in/6/4"), in_progress, fenced) is None


def test_a_recorded_drain_marker_is_no_dead_letter_and_a_forged_one_is() -> None:
    app = counting_app()
    processor = RecordProcessor(app, {TOPIC: 4}, histories={TOPIC: HISTORY})
    batch = database(app).begin()
    outcomes = []
    for partition, value in ((5, b"in/2/5/5/drain"), (1, b"in/2/5/5/drain")):
        marker = StoredMessage(TOPIC, partition, 30, None, b"{}", None, header(value))
        outcomes.append(processor.process(batch, marker))
    batch.abort()
    assert outcomes[0] == ([], None)
    _outputs, dead = outcomes[1]
    assert dead is not None and dead.reason.startswith("unrecorded marker:"), dead


def test_a_marker_with_its_id_as_key_is_a_marker_and_another_keyed_record_is_not() -> None:
    # a compacted topic's markers have a key (Kafka refuses keyless records there): their id
    app = counting_app()
    processor = RecordProcessor(app, {TOPIC: 4}, histories={TOPIC: HISTORY})
    db = database(app)
    batch = db.begin()
    keyed = StoredMessage(TOPIC, 5, 30, b"in/2/5/5/drain", b"{}", None, header(b"in/2/5/5/drain"))
    forged = StoredMessage(TOPIC, 5, 31, b"in/2/5/6/drain", b"{}", None, header(b"in/2/5/5/drain"))
    assert is_marker_record(TOPIC, keyed.key(), keyed.headers())
    assert not is_marker_record(TOPIC, forged.key(), forged.headers())
    assert not is_marker_record(TOPIC, b"user-1", header(b"in/2/5/5/drain"))
    assert processor.process(batch, keyed) == ([], None)  # never given to the function
    batch.commit()
    assert db.get("counts", b"in/2/5/5/drain") is None
