"""Schedules that once found a defect, kept as plans (a seed alone would draw another
schedule as soon as the plan generator changes). ``python -m tests.sim.runner --regression
NAME`` replays one; the suite runs them all. Each failed before its fix.

A plan's schedule still changes when the simulated world does (a new fault, a more faithful
broker): a kept plan then runs on as a schedule that must hold every invariant, but may no
longer reach its defect. Put the defect back (its patch in ``bench/mutations/``) and replay
the plan to know; ``bench/mutations.py`` says which seeds find each defect now.
"""

from __future__ import annotations

from tests.sim.plan import Plan
from tests.sim.regressions_growth import GROWTH_REGRESSIONS
from tests.sim.regressions_handoffs import HANDOFF_REGRESSIONS
from tests.sim.regressions_state import STATE_REGRESSIONS

__all__ = ["REGRESSIONS"]

#: every kept plan of the three kinds, by name
REGRESSIONS: dict[str, Plan] = {**STATE_REGRESSIONS, **HANDOFF_REGRESSIONS, **GROWTH_REGRESSIONS}
