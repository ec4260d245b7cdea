"""Issue 32 item 2 (a review found it): a receiver's catch-up must reach an ancestor's
threshold, or F, when the offsets just below it are a transaction's COMMIT marker and a
record lies at it (the growth marker itself, or any later record of the parent).

The catch-up applies the transaction's records (position = the marker's offset); its consumer
passes the marker and delivers the record at the threshold; that record is at the bound, so
``_read_ahead`` pauses the partition (or keeps it in the read-ahead while T1 was below the
bound), and ``passed_within`` never moves a paused or read-ahead partition: the catch-up stays
one below the threshold for ever, ``caught_up`` is never true and the scale never finishes.

Both failed before the fix (the catch-up stayed one below its limit); a real broker."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from rebalance import HandoffEvent
from tests.integration.catchup_world import World, drive, handoff, release, send
from tests.integration.test_transactional_inputs import keys_of, transaction

pytestmark = pytest.mark.integration


@pytest.mark.timeout(120)
def test_catch_up_reaches_a_threshold_right_after_a_commit_marker(
    kafka_bootstrap: str, kafka_admin: AdminClient
) -> None:
    world = World(kafka_bootstrap, kafka_admin, partitions=4, initial=2, b=1)
    staying = keys_of(0, 2, 3)  # partition 0 at 2 partitions
    transaction(kafka_bootstrap, world.topic, 0, staying, commit=True)  # 0-2, COMMIT at 3
    world.ends[0] = 4
    world.counts.append(4)
    world.thresholds[2] = 4  # the growth marker's offset: right after the COMMIT marker
    world.thresholds[3] = 0
    # the record at the threshold (the growth marker is one; a later record of a key that
    # stays in partition 0 is another)
    world._producer.produce(world.topic, key=staying[0], value=b"x", partition=0)
    assert world._producer.flush(30) == 0
    world.commit_group({0: 5})  # the old owner, processor 0, read all of it
    state = send(world.control(1, 3), 0, 2, HandoffEvent.START_CATCH_UP)
    database = world.database(2)
    catchup = world.catch_up(2, state, database)
    try:
        drive(catchup, lambda: catchup.caught_up(handoff(state, 0, 2), 0), seconds=30)
    finally:
        catchup.close()


@pytest.mark.timeout(180)
def test_catch_up_reaches_f_right_after_a_commit_marker_when_paused(
    kafka_bootstrap: str, kafka_admin: AdminClient
) -> None:
    """The same on a moved partition (S1) released at F: the receiver applied a committed
    transaction (offsets 0-5, COMMIT at 6), the old owner's F is 7 (its consumer passed the
    marker), and records after F filled the receiver's read-ahead, so the partition was
    paused. RELEASE resumes it from the catch-up's position, 6: the fetch passes the marker
    and delivers the record at F, which is past F: paused again, never passed over. The
    handoff stays RELEASED for ever."""
    world = World(kafka_bootstrap, kafka_admin, partitions=2, initial=2, b=1)
    moved = keys_of(1, 2, 6)
    transaction(kafka_bootstrap, world.topic, 1, moved, commit=True)  # 0-5, COMMIT at 6
    world.ends[1] = 7
    world.produce([moved[0]] * 6000)  # the new owner's records after F (offsets 7...)
    world.commit_group({1: 6})  # T1: the old owner committed its last batch (0-5)
    state = send(world.control(1, 2), 0, 1, HandoffEvent.START_CATCH_UP)
    database = world.database(1)
    catchup = world.catch_up(1, state, database)
    try:
        drive(catchup, lambda: catchup.caught_up(handoff(state, 0, 1), 0), seconds=30)
        for _ in range(50):  # let the read-ahead fill past T1 (then the partition pauses)
            catchup.step(1000, timeout=0.05)
        state = release(send(state, 0, 1, HandoffEvent.CAUGHT_UP), 0, 1, {(world.topic, 1): 7})
        catchup.release(handoff(state, 0, 1))
        drive(catchup, lambda: catchup.finished(handoff(state, 0, 1)), seconds=30)
    finally:
        catchup.close()
