"""Kept plans (see ``tests/sim/regressions.py``) that found a defect of a scale's handoffs:
releases, catch-ups of gained keys, purges and snapshot transfers.
"""

from __future__ import annotations

from tests.sim.plan import Operation, Plan

__all__ = ["HANDOFF_REGRESSIONS"]

HANDOFF_REGRESSIONS: dict[str, Plan] = {
    # An old owner whose state held no offset of a moved partition the group had committed
    # at 0 waited for a restore that never came: the scale stayed READY forever.
    "release-waits-for-nothing-80": Plan(
        seed=80,
        partitions=4,
        initial_processors=2,
        keys=6,
        producers=1,
        records=20,
        max_records=3,
        ready_lag=2,
        operations=(
            Operation("expand", 8, 1.6),
            Operation("scale", 6, 2.8),
            Operation("abort", 0, 0.2),
            Operation("scale", 7, 1.7),
        ),
        kill_rate=0.003,
        protocol_kill_rate=0.2,
        compact_rate=0.002,
        chaos_steps=3000,
    ),
    "release-waits-for-nothing-544": Plan(
        seed=544,
        partitions=4,
        initial_processors=2,
        keys=8,
        producers=2,
        records=11,
        max_records=20,
        ready_lag=2,
        operations=(Operation("scale", 4, 2.8),),
        kill_rate=0.01,
        slow_rate=0.2,
        protocol_kill_rate=0.2,
        chaos_steps=500,
    ),
    # A growth by four made grandchildren (13 -> 5 -> 1 for N=4, M=16); a scale-in's catch-up
    # read partition 13 as soon as its parent 5 (empty at the growth) reached its threshold,
    # before the grandparent 1 reached 5's: a key's later record was applied before its
    # earlier one (found with no fault at all).
    "grandchild-before-grandparent-209": Plan(
        seed=209,
        partitions=4,
        initial_processors=2,
        keys=4,
        producers=1,
        records=22,
        max_records=5,
        ready_lag=0,
        operations=(
            Operation("expand", 16, 1.3),
            Operation("scale", 6, 0.4),
            Operation("scale", 2, 1.1),
        ),
        chaos_steps=500,
        max_kills=0,
    ),
    # Schedules of the CI's 1,000 that find an issue-12 defect put back (never on main): the
    # kept plans keep finding it once the generator changes.
    # 12.3: a restarted receiver replays handoffs that already completed (double apply).
    "completed-handoffs-replayed-459": Plan(
        seed=459,
        partitions=4,
        initial_processors=2,
        keys=6,
        producers=2,
        records=55,
        max_records=20,
        ready_lag=0,
        operations=(
            Operation("expand", 8, 1.8),
            Operation("scale", 6, 0.8),
            Operation("scale", 2, 1.0),
            Operation("scale", 5, 2.4),
        ),
        kill_rate=0.001,
        protocol_kill_rate=0.5,
        compact_rate=0.002,
        lose_disk_rate=0.3,
        reopen_kill_rate=1.0,
        aimed_rate=1.0,
        chaos_steps=3000,
    ),
    # 2d75e30: an old owner releases a parent below a child's growth threshold.
    "parent-released-below-child-threshold-90": Plan(
        seed=90,
        partitions=2,
        initial_processors=1,
        keys=5,
        producers=1,
        records=33,
        max_records=1,
        ready_lag=10,
        operations=(
            Operation("expand", 8, 1.8),
            Operation("scale", 8, 1.6),
            Operation("scale", 1, 1.7),
        ),
        kill_rate=0.001,
        slow_rate=0.2,
        protocol_kill_rate=0.2,
        outage_rate=0.002,
        lose_disk_rate=0.3,
        aimed_rate=1.0,
        chaos_steps=1000,
    ),
    # 12 -> 2 after a growth 4 -> 16: processor 0 received partition 2 (from 2) and its child
    # 10 (from 10). Handoff 10 completed while the catch-up had not read partition 2 (another
    # handoff's partition, so not a bounded ancestor) to partition 10's threshold; killed
    # then, processor 0 restarted with a catch-up that no longer gains partition 10's keys,
    # and their records in partition 2 were never applied. Found once records that kill the
    # processor were written (which changed the schedule).
    "handoff-completed-before-its-ancestor-was-read-63": Plan(
        seed=63,
        partitions=4,
        initial_processors=2,
        keys=8,
        producers=2,
        records=29,
        max_records=1,
        ready_lag=0,
        operations=(
            Operation("expand", 16, 1.3),
            Operation("scale", 12, 0.8),
            Operation("scale", 2, 0.2),
        ),
        kill_rate=0.001,
        fail_rate=0.002,
        protocol_kill_rate=0.2,
        compact_rate=0.01,
        lose_disk_rate=0.3,
        reopen_kill_rate=1.0,
        aimed_rate=0.5,
        special_rate=0.1,
        killers=True,
        chaos_steps=6000,
    ),
    # 5 -> 2 -> 7: processor 2 gave its keys to 0 and was killed before its purge began;
    # restarted once 2 -> 7 had begun, in which it receives other keys, it skipped the old
    # purge (a later scale brought it keys) and kept keys another processor owns. The purge
    # now runs, keeping only the keys received again. Found once a consumer fetched nothing
    # during an outage (which changed the schedule).
    "purge-skipped-after-a-later-receipt-77": Plan(
        seed=77,
        partitions=4,
        initial_processors=2,
        keys=8,
        producers=1,
        records=11,
        max_records=20,
        ready_lag=0,
        operations=(
            Operation("expand", 8, 0.6),
            Operation("scale", 5, 1.9),
            Operation("scale", 2, 3.0),
            Operation("scale", 7, 1.9),
        ),
        kill_rate=0.001,
        fail_rate=0.01,
        protocol_kill_rate=0.2,
        outage_rate=0.0005,
        lose_disk_rate=0.3,
        reopen_kill_rate=0.5,
        chaos_steps=6000,
    ),
    # A receiver's catch-up stopped (retention deleted records just ahead of it) after it
    # wrote CAUGHT_UP, and its source's RELEASE, decided before the source read the stop,
    # landed after it: applied, it wiped the stop, and the scale (started by a racing
    # operator as the growth began) could neither finish nor be aborted. A RELEASE after
    # its receiver's stop is now ignored and its source takes the partitions back. Found as
    # seeds 258 and 940 once the catch-up met deleted records.
    "release-after-the-receiver-stopped-940": Plan(
        seed=940,
        partitions=4,
        initial_processors=2,
        keys=6,
        producers=1,
        records=17,
        max_records=1,
        ready_lag=10,
        operations=(Operation("expand", 16, 1.2),),
        slow_rate=0.2,
        aimed_rate=1.0,
        max_queued=1,
        chaos_steps=500,
        max_kills=0,
    ),
    # A receiver's earlier run replayed instead of waiting for its source's snapshot (the
    # source had none yet) and wrote CAUGHT_UP; its disk was lost and restored from its own
    # snapshot taken before that, and its source, restarted, released at once, then took
    # snapshots without the partition it gave away. The receiver's next run waited for a
    # snapshot of the scale covering that partition, which could never come: the scale
    # stayed RELEASED. A transfer now replays a source's keys once it read the RELEASE with
    # no usable snapshot (seed 790, shrunk).
    "receiver-waits-for-a-released-sources-snapshot-790": Plan(
        seed=790,
        partitions=4,
        initial_processors=2,
        keys=5,
        producers=1,
        records=25,
        max_records=3,
        ready_lag=10,
        operations=(
            Operation("expand", 8, 1.1),
            Operation("scale", 8, 0.3),
            Operation("scale", 2, 1.7),
            Operation("scale", 3, 0.8),
        ),
        kill_rate=0.001,
        slow_rate=0.2,
        outage_rate=0.002,
        lose_disk_rate=0.3,
        aimed_rate=0.5,
        rival=True,
        snapshots=True,
        chaos_steps=500,
        twin=True,
        twin_at=1.2,
        twin_for=16.8,
    ),
}
