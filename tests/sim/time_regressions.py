"""Timed schedules (``Plan.timed``) that found a defect, kept as plans as in
``tests/sim/regressions.py`` (replay one with ``python -m tests.sim.runner --regression
NAME``). ``UNFIXED`` names those whose defect is not fixed yet.
"""

from __future__ import annotations

from tests.sim.plan import Operation, Plan

__all__ = ["TIME_REGRESSIONS", "UNFIXED"]

TIME_REGRESSIONS: dict[str, Plan] = {
    # A tick in a growth's child, read before the parent was read past the child's marker,
    # was applied at once (keyless records never waited at a gate): the moved key took its
    # floor ahead of its own records still in the parent, so the live run closed its windows
    # and fired its timers early, and a replay after a restart did otherwise (seed 32; also
    # 4, 23, 28, 39, 55, 78 of 0..99; fixed by 9cea90a: a tick waits at every gate).
    "tick-in-a-child-before-its-parents-marker-32": Plan(
        seed=32,
        partitions=1,
        initial_processors=1,
        keys=1,
        records=4,
        ready_lag=0,
        operations=(Operation("expand", 2, 0.3), Operation("expand", 6, 2.5)),
        chaos_steps=500,
        max_kills=0,
        twin=True,
        twin_at=7.4,
        twin_for=35.0,
        timed=True,
    ),
    # A receiver's catch-up skipped the ticks it replayed (keyless: no gained key's): its
    # keys missed the floors their old owner had applied, so it emitted again windows and
    # timers the old owner had emitted, with other values (seed 72; also 4, 8, 9, 49; fixed
    # by b8dd5f1: a catch-up applies ticks to the keys it gains).
    "catch-up-skips-ticks-72": Plan(
        seed=72,
        initial_processors=1,
        keys=5,
        records=50,
        max_records=1,
        ready_lag=10,
        operations=(Operation("expand", 8, 1.5), Operation("scale", 5, 1.4)),
        snapshots=True,
        exactly_once=True,
        in_flight=2,
        chaos_steps=1000,
        max_kills=0,
        junk=True,
        timed=True,
    ),
    # A tick in a shrink's survivor at or past its hold offset, read while the processor's
    # view of the registry lacked the shrink (a survivor gets no marker; a keyed record there
    # makes the processor read the registry again, a tick did not), was judged by the older
    # step: the keys merged into the survivor did not take it, though they live there by the
    # history every replay reads (seed 48 here, 4 -> 12 -> 15 -> 7 partitions; 58 and 83
    # before the runtime wrote ticks of its own, also after a re-growth onto a deleted
    # partition, whose new life has no marker in it either). Fixed: a tick names the steps
    # of the history its writer knew, a reader with fewer reads the registry again, and every
    # reader applies it by those steps (``Homes.takes_tick``).
    "tick-judged-by-a-registry-view-older-than-it-48": Plan(
        seed=48,
        partitions=4,
        records=50,
        max_records=3,
        ready_lag=2,
        operations=(
            Operation("expand", 12, 0.3),
            Operation("expand", 15, 1.5),
            Operation("expand", 7, 1.9),
        ),
        in_flight=2,
        chaos_steps=500,
        max_kills=0,
        timed=True,
    ),
    # A batch's tick handed to a producer whose queue was full (queue.buffering.max.messages
    # of 1-3) waited for room, serving the batch's output reports meanwhile; the pipeline
    # then added the tick to a count of unacknowledged deliveries it had read before those
    # reports (``pending += send(...)``), which so never reached 0: the processor stopped
    # after 60 s at every run, and the world never settled (seed 18; also 40, 52, 57, 66,
    # 80, 99 of 0..99: every timed plan whose producers queue 1-3 records).
    "tick-counted-over-a-report-served-meanwhile-18": Plan(
        seed=18,
        partitions=1,
        initial_processors=1,
        keys=2,
        records=25,
        max_records=3,
        ready_lag=0,
        outage_rate=0.002,
        compact_rate=0.01,
        max_queued=1,
        in_flight=4,
        chaos_steps=3000,
        max_kills=0,
        timed=True,
    ),
}

#: kept plans whose defect is not fixed yet, and why (their test is a strict xfail)
UNFIXED: dict[str, str] = {}
