"""Run simulation schedules in a process of their own: ``python -m tests.sim.runner``.

The process fixes ``PYTHONHASHSEED`` (set and dict orders of strings then repeat from run to
run, so a seed replays exactly) by re-executing itself when it is not ``0``.

    python -m tests.sim.runner --first 0 --count 500   # schedules 0..499; exit 1 on a failure
    python -m tests.sim.runner --seed 42 --verbose     # replay one schedule, show what happened
    python -m tests.sim.runner --kept                  # every kept plan, each under a header
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from tests.sim.driver import Outcome, run_schedule, shrink
from tests.sim.plan import Plan, draw_plan
from tests.sim.regressions import REGRESSIONS
from tests.sim.time_regressions import TIME_REGRESSIONS

__all__ = ["KEPT_HEADER", "main", "run_seeds"]

#: How ``--kept`` heads each kept plan's report: this, its name, ``: ``, then ``ok`` or
#: ``FAILED`` (tests/sim/test_simulation.py splits the output by these lines).
KEPT_HEADER = "=== kept plan "


def run_seeds(
    seeds: list[int], *, shrink_failures: bool = True, stop_first: bool = False
) -> list[Outcome]:
    """Run ``seeds``; the failed outcomes (each shrunk when asked; only the first one when
    ``stop_first``)."""
    failed: list[Outcome] = []
    for seed in seeds:
        if stop_first and failed:
            break
        outcome = run_schedule(draw_plan(seed))
        if not outcome.ok:
            failed.append(outcome)
            if shrink_failures:
                small = shrink(outcome)
                print(_failure(outcome, small), flush=True)
            else:
                print(outcome.report(), flush=True)
    return failed


def _failure(outcome: Outcome, small: Outcome) -> str:
    seed = outcome.plan.seed
    return (
        f"=== schedule {seed} FAILED\n{outcome.report()}\n\n"
        f"--- smallest failing variant found:\n{small.report()}\n"
        f"--- replay: pytest tests/sim -k replay --seed {seed}\n"
        f"--- keep as a regression case: {small.plan.literal()}\n"
    )


def _run_kept(kept: dict[str, Plan]) -> int:
    """Run every kept plan in this one process (a schedule does not depend on the ones run
    before it: seeds replay alike alone or in a run of many); 1 when any failed."""
    failed = 0
    for name in sorted(kept):
        outcome = run_schedule(kept[name])
        failed += not outcome.ok
        verdict = "ok" if outcome.ok else "FAILED"
        print(f"{KEPT_HEADER}{name}: {verdict}", flush=True)
        print(outcome.report(), flush=True)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    """Run the schedules the arguments name; 0 when every one holds its invariants."""
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.environ["PYTHONHASHSEED"] = "0"
        argv = [sys.executable, "-m", "tests.sim.runner", *sys.argv[1:]]
        os.execv(sys.executable, argv)  # noqa: S606 - this same program, with the hash seed fixed
    parser = argparse.ArgumentParser(prog="python -m tests.sim.runner")
    parser.add_argument("--first", type=int, default=0, help="first seed")
    parser.add_argument("--count", type=int, default=1, help="how many seeds")
    parser.add_argument("--seed", type=int, help="one seed (replay)")
    parser.add_argument("--regression", help="one kept plan of tests/sim/*regressions.py")
    parser.add_argument("--kept", action="store_true", help="every kept plan, one by one")
    parser.add_argument("--verbose", action="store_true", help="report every schedule")
    parser.add_argument("--no-shrink", action="store_true", help="report failures as they are")
    parser.add_argument("--stop-first", action="store_true", help="stop at the first failure")
    parser.add_argument("--skip", default="", help="seeds not to run (comma-separated)")
    args = parser.parse_args(argv)
    if args.seed is not None:
        seeds = [args.seed]
    else:
        skipped = {int(seed) for seed in args.skip.split(",") if seed.strip()}
        seeds = [s for s in range(args.first, args.first + args.count) if s not in skipped]
    started = time.monotonic()
    kept = {**REGRESSIONS, **TIME_REGRESSIONS}
    if args.regression is not None:
        outcome = run_schedule(kept[args.regression])
        print(outcome.report(), flush=True)
        return 0 if outcome.ok else 1
    if args.kept:
        return _run_kept(kept)
    if args.verbose:
        failed = 0
        for seed in seeds:
            outcome = run_schedule(draw_plan(seed))
            print(outcome.report(), flush=True)
            if not outcome.ok:
                failed += 1
                if not args.no_shrink:
                    print(_failure(outcome, shrink(outcome)), flush=True)
    else:
        shrinking = not args.no_shrink
        failed = len(run_seeds(seeds, shrink_failures=shrinking, stop_first=args.stop_first))
    elapsed = time.monotonic() - started
    print(
        f"{len(seeds)} schedules, {failed} failed, {elapsed:.1f}s "
        f"({len(seeds) / max(elapsed, 1e-9):.1f} schedules/s)",
        flush=True,
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
