"""The crash guard: which records were in flight when the process died, and their counts."""

from __future__ import annotations

import orjson

from framework.processing import StoredMessage
from framework.runtime.crashes import CrashGuard, skipped_records
from statestore import DatabaseIdentity, ProcessorDatabase, StoreSpec
from tests.clocks import ManualClock

T0, T1 = ("t", 0), ("t", 1)


CLOCK = ManualClock(1_700_000_123.25, may_sleep=False)


def database() -> ProcessorDatabase:
    return ProcessorDatabase.in_memory(DatabaseIdentity("crashes", 0), [StoreSpec("s")])


def guard(db: ProcessorDatabase) -> CrashGuard:
    """What a (re)start of the processor sees."""
    return CrashGuard(db, limit=3, processor=0, clock=CLOCK)


def test_a_batch_that_finished_leaves_no_suspects() -> None:
    db = database()
    first = guard(db)
    assert not first.careful({T0})
    first.attempt({T0: [5, 9]})
    first.survived()
    assert guard(db).suspects == {}


def test_a_crash_counts_against_the_records_in_flight_until_one_is_skipped() -> None:
    db = database()
    guard(db).attempt({T0: [5, 9], T1: [0, 3]})  # the process dies here
    second = guard(db)
    # a crash amid several records names none of them: they become suspects, uncounted
    assert second.careful({T0, T1})
    assert [second.crashes("t", 0, o) for o in (4, 5, 9, 10)] == [0, 0, 0, 0]
    assert second.suspects[T0].first == 5 and second.suspects[T1].last == 3
    batch = db.begin()  # one record at a time: offset 5 is fine
    batch.set_offset("t", 0, 6)
    batch.commit()
    second.committed({T0: 6})
    assert second.suspects[T0].first == 6
    second.attempt({T0: [6, 6]})  # dies on offset 6, alone: that counts
    third = guard(db)
    assert set(third.suspects) == {T0}  # T1 was not in flight this time
    assert third.crashes("t", 0, 6) == 1 and third.crashes("t", 0, 7) == 0
    third.attempt({T0: [6, 6]})  # dies again
    third_again = guard(db)
    third_again.attempt({T0: [6, 6]})  # and again
    fourth = guard(db)
    assert fourth.crashes("t", 0, 6) == 3 == fourth.limit

    message = StoredMessage("t", 0, 6, b"k", b"v", None, [("h", b"1")])
    batch = db.begin()
    letter = fourth.skip(batch, message, ("t", 0, 6), "dead", restore=False)
    batch.set_offset("t", 0, 7)
    batch.commit()
    fourth.committed({T0: 7})
    assert not fourth.careful({T0})
    assert letter is not None and letter.stage == "crash"
    assert letter.reason.startswith("killed the processor 3 times")
    assert (letter.key, letter.value, letter.headers) == (b"k", b"v", (("h", b"1"),))
    [skipped] = skipped_records(db)
    assert (skipped.topic, skipped.partition, skipped.offset, skipped.crashes) == ("t", 0, 6, 3)
    assert skipped.at == CLOCK.now  # when it was skipped, on the run's clock


def test_suspects_start_at_the_committed_offset_and_leave_with_their_partition() -> None:
    db = database()
    batch = db.begin()
    batch.set_offset("t", 0, 8)
    batch.commit()
    guard(db).attempt({T0: [5, 9], T1: [0, 0]})
    restarted = guard(db)
    assert restarted.suspects[T0].first == 8
    assert restarted.careful({T0})
    assert set(restarted.suspects) == {T0}  # T1 is no longer this processor's
    restarted.committed({T0: 10})
    assert not restarted.careful({T0})


def test_the_attempt_record_is_small_json() -> None:
    db = database()
    guard(db).attempt({T0: [5, 9]})
    raw = db.backend.get("__splitstate", b"crash/attempt")
    assert raw is not None and orjson.loads(raw) == {"ranges": [["t", 0, 5, 9, 0]]}


def test_with_a_limit_of_one_a_crash_amid_a_batch_skips_no_good_record() -> None:
    db = database()
    CrashGuard(db, limit=1, processor=0, clock=CLOCK).attempt({T0: [0, 9]})  # offset 5 kills it
    after = CrashGuard(db, limit=1, processor=0, clock=CLOCK)
    assert after.careful({T0})
    assert all(after.crashes("t", 0, o) < after.limit for o in range(10))
    after.attempt({T0: [0, 0]})  # offset 0 alone survives...
    after.survived()
    batch = db.begin()
    batch.set_offset("t", 0, 5)  # ... and so do 1..4
    batch.commit()
    after.committed({T0: 5})
    after.attempt({T0: [5, 5]})  # offset 5 alone kills it: now it is named
    last = CrashGuard(db, limit=1, processor=0, clock=CLOCK)
    assert last.crashes("t", 0, 5) == 1 == last.limit
    assert last.crashes("t", 0, 6) == 0


def test_with_a_limit_of_one_a_crash_amid_lone_records_of_several_partitions_skips_none() -> None:
    """A batch of one record of each of two partitions dies: each record is alone in its
    partition's range, but the death names neither (it counts against nothing); each alone
    in the next batches, only the one that kills is counted."""
    db = database()
    CrashGuard(db, limit=1, processor=0, clock=CLOCK).attempt({T0: [3, 3], T1: [7, 7]})
    after = CrashGuard(db, limit=1, processor=0, clock=CLOCK)
    assert after.careful({T0, T1})
    assert after.crashes("t", 0, 3) == after.crashes("t", 1, 7) == 0
    after.attempt({T1: [7, 7]})  # alone: it kills
    last = CrashGuard(db, limit=1, processor=0, clock=CLOCK)
    assert last.crashes("t", 1, 7) == 1 == last.limit
    assert last.crashes("t", 0, 3) == 0
