"""Schedules/s of the deterministic simulation (tests/sim), by store and by fault mix.

Runs the same seeds' plans in each variant, side by side: as drawn; with in-memory stores
only; with RocksDB stores only; without faults. Prints schedules/s, scheduler steps/s and
the simulated seconds per real second.

Run: PYTHONHASHSEED=0 .venv/bin/python bench/sim.py [--seeds N]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the simulation lives in tests/

from tests.sim.driver import run_schedule
from tests.sim.plan import Plan, draw_plan


def _without_faults(plan: Plan) -> Plan:
    """``plan`` with every fault, aimed fault, special record and racing operator off."""
    return replace(
        plan,
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
        days_later=False,
        max_queued=100_000,
        rival=False,
    )


VARIANTS: list[tuple[str, Callable[[Plan], Plan]]] = [
    ("as drawn (33% RocksDB)", lambda plan: plan),
    ("memory stores", lambda plan: replace(plan, rocksdb=False)),
    ("RocksDB stores", lambda plan: replace(plan, rocksdb=True)),
    ("no faults", _without_faults),
]


def main() -> None:
    """Print a table: one row per variant."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=100)
    args = parser.parse_args()
    plans = [draw_plan(seed) for seed in range(args.seeds)]
    header = f"{'variant':<24} {'schedules/s':>12} {'steps/s':>10} {'sim s/s':>9} {'failed':>7}"
    print(header)
    for name, variant in VARIANTS:
        steps = 0
        simulated = 0.0
        failed = 0
        start = time.perf_counter()
        for plan in plans:
            outcome = run_schedule(variant(plan))
            steps += outcome.steps
            simulated += outcome.simulated_seconds
            failed += not outcome.ok
        elapsed = time.perf_counter() - start
        print(
            f"{name:<24} {len(plans) / elapsed:>12.1f} {steps / elapsed:>10.0f} "
            f"{simulated / elapsed:>9.1f} {failed:>7}"
        )


if __name__ == "__main__":
    main()
