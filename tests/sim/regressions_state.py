"""Kept plans (see ``tests/sim/regressions.py``) that found a defect of processor state: a
lost state directory, the check of a fresh one, history that retention deleted under a
rebuild or a catch-up.
"""

from __future__ import annotations

from tests.sim.plan import Operation, Plan

__all__ = ["STATE_REGRESSIONS"]

STATE_REGRESSIONS: dict[str, Plan] = {
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
}
