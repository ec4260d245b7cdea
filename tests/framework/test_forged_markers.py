"""Records that claim to be growth markers (issue 33, item 6).

A keyless record with a ``splitstate.marker`` header fences its partition only if the topic
registry records that growth; otherwise it is a dead letter (stage ``placement``,
``unrecorded marker: ...``). Before the fix any such header was trusted: one forged marker
sent about half of the partition's later, correctly placed records to dead letters as
``late``, and one of another shape was dropped silently. A genuine marker newer than the
processor's view of the registry is checked against the registry read again, never refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import pytest

from framework import KafkaIOError
from framework.coordination.registry import (
    Growth,
    RegistryEntries,
    RegistryRecordError,
    TopicEntry,
    _Unreadable,
)
from framework.growth.markers import MARKER_HEADER
from framework.growth.placement import COUNT_HEADER
from framework.processing import RecordProcessor, StoredMessage
from framework.testing import TestDriver
from rebalance import TopicHistory, bucket, key_hash
from tests.framework.test_record_headers import (
    TOPIC,
    N,
    UnreadableHeaders,
    counting_app,
    database,
)

Headers = list[tuple[str, bytes | None]]


def key_on(partition: int, count: int = N, *, moved_to: int | None = None) -> bytes:
    """A key ``N`` partitions place in ``partition`` (and ``count`` in ``moved_to``)."""
    for i in range(5000):
        key = f"key-{i}".encode()
        h = key_hash(key)
        if bucket(h, N, N) == partition and (moved_to is None or bucket(h, N, count) == moved_to):
            return key
    raise AssertionError("no such key")


def test_a_forged_marker_is_a_dead_letter_and_fences_nothing() -> None:
    driver = TestDriver(counting_app())
    keys = [k for k in (f"user-{i}".encode() for i in range(400)) if bucket(key_hash(k), N, N) == 0]
    placed: Headers = [(COUNT_HEADER, b"2")]
    for key in keys[:20]:
        driver.send(TOPIC, key, b"v", placed)
    driver.send(TOPIC, None, b"{}", [(MARKER_HEADER, f"{TOPIC}/4/2".encode())], partition=0)
    (forged,) = driver.dead_letters
    assert forged.stage == "placement"
    assert forged.reason.startswith("unrecorded marker:"), forged.reason
    assert "growth of 'in' to 4 partitions" in forged.reason
    assert "does not record" in forged.reason and "Fix:" in forged.reason
    for key in keys:
        driver.send(TOPIC, key, b"v", placed)
    assert driver.dead_letters == [forged]  # none of the records after it is late
    assert sum(driver.state("counts", k) for k in keys) == len(keys) + 20


@pytest.mark.parametrize(
    "value",
    [
        b"garbage",
        b"{}",
        None,
        b"in/4",
        b"in/x/2",
        b"in/4/2/",
        b"\xff/4/2",
        b"in/-4/2",
        b"in/4/2" * 40,
    ],
)
def test_a_marker_header_of_another_shape_is_a_dead_letter(value: bytes | None) -> None:
    driver = TestDriver(counting_app())
    driver.send(TOPIC, None, b"v", [(MARKER_HEADER, value)], partition=0)
    (dead,) = driver.dead_letters
    assert dead.stage == "placement" and dead.reason.startswith("unrecorded marker:")
    assert "is not the one header in/<step>/<partition count>/<new partition>" in dead.reason
    assert len(dead.reason) < 1500


def test_two_marker_headers_are_a_dead_letter() -> None:
    driver = TestDriver(counting_app())
    twice: Headers = [(MARKER_HEADER, b"in/4/2"), (MARKER_HEADER, b"in/4/2")]
    driver.send(TOPIC, None, b"v", twice, partition=0)
    assert [d.reason.split(":")[0] for d in driver.dead_letters] == ["unrecorded marker"]


GROWN = TopicHistory.of(TOPIC, [N, 4], {2: 10, 3: 12})  # 2 split from 0 at 10, 3 from 1 at 12
IN_PROGRESS = TopicHistory.of(TOPIC, [N, 4])
FENCED = Growth(4, 0, fence_ends={0: 8, 1: 11})


def marker_outcome(
    history: TopicHistory, growth: Growth | None, partition: int, offset: int, header: bytes
) -> str | None:
    """The dead letter reason of a marker (``None``: taken as a marker)."""
    app = counting_app()
    growths = {} if growth is None else {TOPIC: growth}
    processor = RecordProcessor(app, {TOPIC: N}, histories={TOPIC: history}, growths=growths)
    batch = database(app).begin()
    marker = StoredMessage(TOPIC, partition, offset, None, b"{}", None, [(MARKER_HEADER, header)])
    outputs, dead = processor.process(batch, marker)
    batch.abort()
    assert outputs == []
    return None if dead is None else dead.reason


@pytest.mark.parametrize(
    ("case", "refused"),
    [
        ((GROWN, None, 0, 10, b"in/4/2"), None),  # the recorded threshold
        ((GROWN, None, 1, 12, b"in/4/3"), None),
        ((GROWN, None, 0, 3, b"in/4/2"), None),  # another marker of it (fences at 10)
        ((GROWN, None, 1, 10, b"in/4/2"), "split from in[0], not from in[1]"),
        ((GROWN, None, 0, 10, b"other/4/2"), "is not the one header"),  # another topic's
        ((GROWN, None, 0, 10, b"in/8/4"), "does not record"),
        ((GROWN, None, 0, 10, b"in/4/0"), "created partitions 2..3"),
        ((TopicHistory.of(TOPIC, [N]), None, 0, 10, b"in/4/2"), "does not record"),
        ((IN_PROGRESS, FENCED, 0, 8, b"in/4/2"), None),  # at or past the fence end
        ((IN_PROGRESS, FENCED, 1, 20, b"in/4/3"), None),
        # before the fence end (the first recorded, which every run of `expand` adopts):
        # written during the lease wait, not by `expand`
        ((IN_PROGRESS, FENCED, 0, 7, b"in/4/2"), "before that step's fence end"),
        ((IN_PROGRESS, Growth(4, 0), 0, 8, b"in/4/2"), "not yet its fence"),
        ((IN_PROGRESS, None, 0, 8, b"in/4/2"), "not yet its fence"),
    ],
)
def test_a_marker_counts_only_when_the_registry_records_its_growth(
    case: tuple[TopicHistory, Growth | None, int, int, bytes], refused: str | None
) -> None:
    reason = marker_outcome(*case)
    if refused is None:
        assert reason is None
    else:
        assert reason is not None and reason.startswith("unrecorded marker:"), reason
        assert refused in reason, reason


def test_a_recorded_marker_of_a_growth_in_progress_fences_its_partition() -> None:
    # the registry has the growth and its fence, not the threshold yet: the marker says it
    app = counting_app()
    moved = key_on(0, 4, moved_to=2)
    processor = RecordProcessor(
        app, {TOPIC: N}, histories={TOPIC: IN_PROGRESS}, growths={TOPIC: FENCED}
    )
    db = database(app)
    batch = db.begin()
    placed: Headers = [(COUNT_HEADER, b"2")]
    marker: Headers = [(MARKER_HEADER, b"in/4/2")]
    found = [
        processor.process(batch, StoredMessage(TOPIC, 0, offset, key, b"", None, headers))[1]
        for offset, key, headers in ((7, moved, placed), (8, None, marker), (9, moved, placed))
    ]
    batch.commit()
    assert found[0] is None and found[1] is None
    assert found[2] is not None and found[2].reason.startswith("late"), found[2]
    assert db.get("counts", moved) == 1


def test_a_second_marker_of_a_recorded_growth_fences_where_the_registry_says() -> None:
    # `expand` resumed after its marker landed unacknowledged writes a second one: the
    # registry records the second; the first is no dead letter, and fences at the threshold
    app = counting_app()
    moved = key_on(0, 4, moved_to=2)
    processor = RecordProcessor(app, {TOPIC: N}, histories={TOPIC: TopicHistory.of(TOPIC, [N])})
    processor.placement.confirm({TOPIC: TopicEntry(GROWN)})  # a read newer than the view
    db = database(app)
    batch = db.begin()
    placed: Headers = [(COUNT_HEADER, b"2")]
    marker: Headers = [(MARKER_HEADER, b"in/4/2")]
    found = [
        processor.process(batch, StoredMessage(TOPIC, 0, offset, key, b"", None, headers))[1]
        for offset, key, headers in ((8, None, marker), (9, moved, placed), (11, moved, placed))
    ]
    batch.commit()
    assert found[0] is None and found[1] is None  # before the threshold (10): not late
    assert found[2] is not None and found[2].reason.startswith("late"), found[2]
    assert "offset 10" in found[2].reason
    assert db.get("counts", moved) == 1


class Registry:
    """A topic registry that counts its reads."""

    def __init__(self, entries: Mapping[str, TopicEntry]) -> None:
        self.entries = dict(entries)
        self.reads = 0

    def read(self) -> dict[str, TopicEntry]:
        self.reads += 1
        return dict(self.entries)


def test_a_marker_newer_than_the_processors_view_is_checked_against_the_registry_again() -> None:
    # the processor read the registry before `expand` recorded the growth; the marker is
    # read before it polls the registry again: it reads it again rather than refuse it
    app = counting_app()
    registry = Registry({TOPIC: TopicEntry(TopicHistory.of(TOPIC, [N]))})
    processor = RecordProcessor(
        app, {TOPIC: N}, histories={TOPIC: TopicHistory.of(TOPIC, [N])}, registry=registry.read
    )
    moved = key_on(0, 4, moved_to=2)
    placed: Headers = [(COUNT_HEADER, b"2")]
    batch_records = [
        StoredMessage(TOPIC, 0, 8, None, b"{}", None, [(MARKER_HEADER, b"in/4/2")]),
        StoredMessage(TOPIC, 0, 9, moved, b"", None, placed),
    ]
    processor.confirm_markers(batch_records[1:])  # no marker: the registry is not read
    assert registry.reads == 0
    registry.entries[TOPIC] = TopicEntry(IN_PROGRESS, growth=FENCED)  # `expand` meanwhile
    processor.confirm_markers(batch_records)
    assert registry.reads == 1
    db = database(app)
    batch = db.begin()
    marker, late = (processor.process(batch, m)[1] for m in batch_records)
    batch.commit()
    assert marker is None  # a genuine marker is never lost
    assert late is not None and late.reason.startswith("late"), late
    processor.confirm_markers(batch_records)  # confirmed now: no read
    assert registry.reads == 1


def test_a_forged_marker_costs_one_registry_read_per_batch_and_stays_refused() -> None:
    app = counting_app()
    registry = Registry({TOPIC: TopicEntry(TopicHistory.of(TOPIC, [N]))})
    processor = RecordProcessor(app, {TOPIC: N}, registry=registry.read)
    forged = [
        StoredMessage(TOPIC, 0, offset, None, b"{}", None, [(MARKER_HEADER, b"in/4/2")])
        for offset in range(5)
    ]
    processor.confirm_markers(forged)
    assert registry.reads == 1
    garbage = StoredMessage(TOPIC, 0, 5, None, b"{}", None, [(MARKER_HEADER, b"garbage")])
    processor.confirm_markers([garbage])
    assert registry.reads == 1  # no registry records a marker of that shape: not read
    batch = database(app).begin()
    reasons = [processor.process(batch, m)[1] for m in forged]
    batch.abort()
    assert all(r is not None and r.reason.startswith("unrecorded marker") for r in reasons)


def test_a_registry_that_cannot_be_read_stops_the_batch_rather_than_judge_a_marker() -> None:
    def unreachable() -> dict[str, TopicEntry]:
        raise KafkaIOError("could not read '__splitstate_topics': broker down")

    processor = RecordProcessor(counting_app(), {TOPIC: N}, registry=unreachable)
    marker = StoredMessage(TOPIC, 0, 8, None, b"{}", None, [(MARKER_HEADER, b"in/4/2")])
    with pytest.raises(KafkaIOError, match=r"marker at in\[0\]@8.*broker down.*Fix:"):
        processor.confirm_markers([marker])


def test_an_adopted_view_older_than_a_confirming_read_is_read_again() -> None:
    # the loop adopts its watcher's entries between batches; they may predate a read made
    # for a marker: a later marker of the growth is then checked against a new read
    app = counting_app()
    registry = Registry({TOPIC: TopicEntry(GROWN)})
    processor = RecordProcessor(app, {TOPIC: N}, registry=registry.read)
    marker = StoredMessage(TOPIC, 0, 10, None, b"{}", None, [(MARKER_HEADER, b"in/4/2")])
    processor.confirm_markers([marker])
    processor.adopt({TOPIC: TopicHistory.of(TOPIC, [N])})
    processor.confirm_markers([replace(marker)])
    assert registry.reads == 2
    batch = database(app).begin()
    assert processor.process(batch, marker) == ([], None)
    batch.abort()


def test_a_keyless_record_read_for_markers_first_is_a_dead_letter_too() -> None:
    # the runtime looks for growth markers in a batch before processing it
    registry = Registry({TOPIC: TopicEntry(TopicHistory.of(TOPIC, [N]))})
    app = counting_app()
    processor = RecordProcessor(app, {TOPIC: N}, registry=registry.read)
    message = UnreadableHeaders(TOPIC, 0, 3, None)
    processor.confirm_markers([message])
    assert registry.reads == 0  # no marker it can read
    batch = database(app).begin()
    _outputs, dead = processor.process(batch, message)
    batch.abort()
    assert dead is not None and dead.stage == "decode" and dead.headers_unreadable


def test_a_marker_is_confirmed_against_what_the_registry_reads_and_others_are_not_met() -> None:
    """The runtime confirms markers with ``TopicRegistry.read``, whose ``RegistryEntries`` is
    no mapping (it crashed the processor with an ``AttributeError`` on the first marker its
    view did not record, genuine or forged, before the crash guard: on every restart); another
    app's entry that cannot be read is never met."""
    unreadable = _Unreadable(offset=7, key=b"other", problem="it is not JSON", previous=None)
    entries = RegistryEntries(
        {TOPIC: TopicEntry(IN_PROGRESS, growth=FENCED)}, {"other": unreadable}
    )
    app = counting_app()
    processor = RecordProcessor(app, {TOPIC: N}, registry=lambda: entries)
    marker = StoredMessage(TOPIC, 0, 8, None, b"{}", None, [(MARKER_HEADER, b"in/4/2")])
    processor.confirm_markers([marker])
    batch = database(app).begin()
    assert processor.process(batch, marker) == ([], None)
    batch.abort()
    own = RegistryEntries({}, {TOPIC: unreadable})
    processor = RecordProcessor(app, {TOPIC: N}, registry=lambda: own)
    with pytest.raises(RegistryRecordError, match="offset 7"):
        processor.confirm_markers([marker])
