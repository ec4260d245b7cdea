"""Schedules that once found a defect, kept as plans (a seed alone would draw another
schedule as soon as the plan generator changes). ``python -m tests.sim.runner --regression
NAME`` replays one; the suite runs them all."""

from __future__ import annotations

from tests.sim.plan import Plan

__all__ = ["REGRESSIONS"]

REGRESSIONS: dict[str, Plan] = {}
