"""Schedules that once found a defect, kept as plans (a seed alone would draw another
schedule as soon as the plan generator changes). ``python -m tests.sim.runner --regression
NAME`` replays one; the suite runs them all. Each failed before its fix.

A plan's schedule still changes when the simulated world does (a new fault, a more faithful
broker): a kept plan then runs on as a schedule that must hold every invariant, but may no
longer reach its defect. Put the defect back (its patch in ``bench/mutations/``) and replay
the plan to know; ``bench/mutations.py`` says which seeds find each defect now.
"""

from __future__ import annotations

from tests.sim.plan import Operation, Plan

__all__ = ["REGRESSIONS"]

REGRESSIONS: dict[str, Plan] = {
    # A state directory lost after a growth and a scale: the processor restarted empty and
    # silently lost the state of the keys whose records are in the parent partition (seeds
    # 274, 361, 363, 865, 892 of the first generator; it now stops and names the fix).
    "lost-disk-after-growth-361": Plan(
        seed=361,
        partitions=2,
        initial_processors=2,
        keys=1,
        producers=1,
        records=4,
        max_records=3,
        ready_lag=0,
        operations=(Operation("expand", 4, 2.8), Operation("scale", 3, 1.6)),
        kill_rate=0.01,
        lose_disk_rate=0.3,
        chaos_steps=3000,
    ),
    # The same, when the run that re-created the lost directory was killed before its first
    # assignment: the next run found a directory of its own and skipped the check.
    "lost-disk-then-killed-at-once-361": Plan(
        seed=361,
        partitions=2,
        initial_processors=2,
        keys=1,
        producers=1,
        records=4,
        max_records=3,
        ready_lag=0,
        operations=(Operation("expand", 4, 2.8), Operation("scale", 3, 1.6)),
        kill_rate=0.01,
        lose_disk_rate=0.3,
        reopen_kill_rate=1.0,
        chaos_steps=3000,
    ),
    # A directory whose check was still pending when a gated child of a partition given
    # away in a scale was first read: checked that late, the child looked rebuilt from
    # another processor's records (a false stop). The check now runs when the run begins.
    "fresh-check-after-a-handoff-445": Plan(
        seed=445,
        partitions=4,
        initial_processors=2,
        keys=8,
        producers=1,
        records=14,
        max_records=20,
        ready_lag=2,
        operations=(Operation("expand", 16, 1.9), Operation("scale", 15, 1.8)),
        kill_rate=0.003,
        fail_rate=0.002,
        slow_rate=0.2,
        chaos_steps=750,
        max_kills=1,
    ),
    "lost-disk-after-growth-667": Plan(
        seed=667,
        partitions=2,
        initial_processors=1,
        keys=3,
        producers=1,
        records=13,
        max_records=1,
        ready_lag=0,
        operations=(Operation("expand", 4, 1.1), Operation("scale", 3, 1.0)),
        kill_rate=0.01,
        lose_disk_rate=0.3,
        chaos_steps=1000,
    ),
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
    # Retention deleted a receiver's history between the catch-up's retention check and its
    # first fetch; the catch-up read from "the beginning", which Kafka moved past the deleted
    # records: gained keys silently lost records (it now reads from offset 0 and stops).
    "history-deleted-under-catch-up-831": Plan(
        seed=831,
        partitions=2,
        initial_processors=1,
        keys=7,
        producers=1,
        records=21,
        max_records=5,
        ready_lag=10,
        operations=(Operation("scale", 2, 2.0), Operation("scale", 1, 1.7)),
        kill_rate=0.003,
        slow_rate=0.2,
        retention_rate=0.001,
        compact_rate=0.002,
        chaos_steps=1000,
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
    # 12.9: a producer's lease stamped when its registry read ends, not when it began.
    "lease-stamped-at-read-end-329": Plan(
        seed=329,
        partitions=4,
        initial_processors=2,
        keys=5,
        producers=1,
        records=42,
        max_records=20,
        ready_lag=0,
        operations=(Operation("expand", 8, 2.7), Operation("scale", 7, 1.4)),
        kill_rate=0.003,
        slow_rate=0.2,
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
    # A lost state directory rebuilt from "the beginning" of partition 0 (no explicit offset):
    # retention deleted its first records right after the start had checked that Kafka held
    # them, and the rebuild began at the new earliest record, its outputs counting one record
    # too few. Every partition is now read from an explicit offset and such a deletion stops
    # the processor. Found once producers had tiny queues (which changed the schedule).
    "rebuild-started-after-retention-deleted-369": Plan(
        seed=369,
        partitions=4,
        initial_processors=2,
        keys=3,
        producers=2,
        records=41,
        max_records=1,
        ready_lag=2,
        operations=(Operation("abort", 0, 0.1), Operation("expand", 4, 0.3)),
        kill_rate=0.01,
        slow_rate=0.05,
        retention_rate=0.001,
        compact_rate=0.01,
        lose_disk_rate=0.3,
        reopen_kill_rate=1.0,
        special_rate=0.1,
        max_queued=1,
        chaos_steps=3000,
    ),
    # A producer placed a record with the counts of its lease as a growth 2 -> 4 landed, then
    # the machine was suspended for 12 days before it queued the record: it landed in the
    # parent after the fence and the child's marker, and was processed after the key's newer
    # records in the child (outputs counted a record the key's order did not have yet). Such a
    # late record is now dead-lettered (stage placement, reason "late ..."). Found as seed 1800
    # first; kept as seed 2659 of the generator whose clock jump is aimed at a producer.
    "late-record-after-a-pause-2659": Plan(
        seed=2659,
        partitions=2,
        initial_processors=2,
        keys=7,
        producers=1,
        records=17,
        max_records=3,
        ready_lag=10,
        operations=(
            Operation("expand", 4, 0.6),
            Operation("scale", 4, 1.3),
            Operation("scale", 2, 1.0),
        ),
        protocol_kill_rate=0.5,
        retention_rate=0.001,
        compact_rate=0.01,
        lose_disk_rate=0.3,
        reopen_kill_rate=1.0,
        aimed_rate=1.0,
        days_later=True,
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
    # A growth that created partitions in Kafka and failed before recording its count
    # (a rival's `expand 5` whose registry write failed; a scale then held the app): Kafka
    # keeps 5 partitions, the registry 3. The app reads the 3 its history created, and so
    # must the checks (they compared status with Kafka's count: a false alarm).
    "unrecorded-partitions-in-kafka-581": Plan(
        seed=581,
        partitions=2,
        initial_processors=2,
        keys=5,
        producers=1,
        records=20,
        max_records=1,
        ready_lag=10,
        operations=(
            Operation("expand", 3, 1.7),
            Operation("scale", 3, 2.5),
            Operation("expand", 5, 0.8),
        ),
        kill_rate=0.001,
        fail_rate=0.01,
        compact_rate=0.002,
        aimed_rate=1.0,
        max_queued=3,
        rival=True,
        in_flight=2,
        chaos_steps=6000,
        upstream=True,
        abort_rate=0.2,
        aborted_partition=0,
        twin=True,
        twin_at=7.3,
        twin_for=32.2,
        junk=True,
    ),
    # A scale after a shrink: the receiver's catch-up judged a merged key's records (placed
    # with the count after the shrink, in the survivor) by its own registry view, which still
    # lacked the shrink (it never met a post-shrink record live), took them for late records
    # and skipped them: its state missed them. The catch-up now reads the registry again
    # before such records, as the live loop does.
    "catch-up-judged-by-a-view-without-the-shrink-120": Plan(
        seed=120,
        partitions=2,
        initial_processors=2,
        keys=8,
        producers=2,
        records=55,
        max_records=20,
        ready_lag=0,
        operations=(
            Operation("expand", 7, 1.1),
            Operation("scale", 3, 2.1),
            Operation("expand", 5, 0.8),
            Operation("scale", 2, 1.5),
        ),
        kill_rate=0.0,
        fail_rate=0.0,
        slow_rate=0.0,
        protocol_kill_rate=0.0,
        outage_rate=0.0,
        retention_rate=0.0,
        compact_rate=0.0,
        lose_disk_rate=0.0,
        reopen_kill_rate=0.0,
        aimed_rate=0.0,
        special_rate=0.0,
        killers=False,
        outputs=True,
        days_later=False,
        max_queued=100000,
        rival=False,
        rocksdb=False,
        snapshots=False,
        exactly_once=False,
        in_flight=1,
        twin=False,
    ),
    # The operator asked again for its changes while a scale ran, also while a receiver
    # of that scale had stopped: the scale waited for the abort that is done once the
    # operators are done, the operators waited for the scale, and the world never settled
    # (a sim defect of 2a5aadc; the operator now goes on when a receiver stopped).
    "operator-waits-on-a-stopped-scale-586": Plan(
        seed=586,
        partitions=4,
        initial_processors=2,
        keys=3,
        producers=1,
        records=57,
        max_records=3,
        ready_lag=0,
        operations=(
            Operation("expand", 12, 1.1),
            Operation("scale", 12, 2.5),
            Operation("expand", 24, 2.8),
            Operation("expand", 30, 0.8),
        ),
        slow_rate=0.05,
        aimed_rate=0.5,
        max_queued=1,
        rival=True,
        rocksdb=True,
        snapshots=True,
        exactly_once=True,
        chaos_steps=3000,
        max_kills=0,
        upstream=True,
        abort_rate=0.5,
        aborted_partition=2,
        twin=True,
        twin_at=7.0,
        twin_for=34.0,
        stop_first=True,
    ),
    # A large world (16 processors over 19 partitions, 4 -> 6 -> 9 -> 18 -> 19 -> 17) that
    # became quiet only after the settle's fixed 60,000 steps: each step runs one party, so
    # the settle now gets 10,000 steps per live party (it was a budget, not a liveness, defect).
    "large-world-settles-late-747": Plan(
        seed=747,
        partitions=4,
        initial_processors=2,
        keys=3,
        producers=2,
        records=26,
        max_records=1,
        ready_lag=10,
        operations=(
            Operation("scale", 4, 2.3),
            Operation("expand", 6, 2.0),
            Operation("expand", 9, 1.6),
            Operation("scale", 2, 1.7),
            Operation("expand", 18, 2.1),
            Operation("scale", 16, 1.7),
            Operation("expand", 19, 2.3),
            Operation("expand", 17, 1.4),
        ),
        protocol_kill_rate=0.5,
        retention_rate=0.001,
        compact_rate=0.03,
        max_queued=1,
        snapshots=True,
        in_flight=4,
        chaos_steps=6000,
        upstream=True,
        abort_rate=0.2,
        aborted_partition=3,
        compacted=True,
    ),
    # The operator still working through its plan when the faults stopped (a compacted
    # input: each change waits a fence after its announcement and another after its count)
    # while the settle counted its steps: the world settled only after the budget ran out.
    # Steps while an operator works no longer count (up to 5 times the budget).
    "operator-works-through-the-settle-905": Plan(
        seed=905,
        partitions=4,
        initial_processors=2,
        keys=7,
        producers=1,
        records=49,
        max_records=5,
        ready_lag=10,
        operations=(
            Operation("expand", 5, 0.4),
            Operation("scale", 5, 0.1),
            Operation("expand", 9, 1.0),
            Operation("expand", 18, 3.0),
            Operation("expand", 17, 2.7),
            Operation("expand", 5, 1.9),
            Operation("scale", 3, 1.2),
            Operation("expand", 6, 2.4),
        ),
        kill_rate=0.001,
        fail_rate=0.002,
        protocol_kill_rate=0.5,
        compact_rate=0.03,
        lose_disk_rate=0.3,
        reopen_kill_rate=1.0,
        outputs=False,
        max_queued=3,
        snapshots=True,
        in_flight=4,
        chaos_steps=1000,
        compacted=True,
    ),
    # Two runs of `expand` at once (the operator and a rival): the operator's last write of
    # a growth (12), built from its own copy, came after the rival had recorded the next
    # change (the shrink to 4): the registry's history went backwards, and the operator then
    # recorded the shrink's holds again, measured later. Processors that read the registry
    # meanwhile dead-lettered on-time records as late. Every reader now keeps the first
    # record of each fact (framework.coordination.entry_order).
    "concurrent-expands-rewrite-the-history-561": Plan(
        seed=561,
        partitions=4,
        initial_processors=2,
        keys=4,
        producers=1,
        records=43,
        max_records=5,
        ready_lag=10,
        operations=(
            Operation("scale", 3, 0.7),
            Operation("expand", 7, 2.3),
            Operation("expand", 12, 1.9),
            Operation("expand", 10, 0.5),
        ),
        kill_rate=0.001,
        slow_rate=0.2,
        protocol_kill_rate=0.5,
        compact_rate=0.002,
        rival=True,
        exactly_once=True,
        in_flight=4,
        chaos_steps=500,
        upstream=True,
        abort_rate=0.2,
    ),
    # Two runs of one growth (the operator and a rival) each found no marker and wrote one;
    # processors judged by the first they met, the registry kept the other run's record of
    # the second: records between the two were dead letters as late. Every run now records
    # the first marker in the log (found again after writing its own).
    "two-markers-of-one-step-58": Plan(
        seed=58,
        partitions=2,
        initial_processors=2,
        keys=7,
        producers=1,
        records=52,
        max_records=5,
        ready_lag=0,
        operations=(
            Operation("expand", 4, 1.2),
            Operation("expand", 8, 0.9),
            Operation("expand", 16, 2.3),
        ),
        slow_rate=0.05,
        compact_rate=0.002,
        max_kills=0,
        rival=True,
        exactly_once=True,
        in_flight=2,
        chaos_steps=500,
        twin=True,
        twin_at=5.0,
        twin_for=40.9,
        stop_first=True,
    ),
}
