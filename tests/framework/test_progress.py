"""Catch-up progress lines: fraction, rate and ETA from two samples."""

from __future__ import annotations

from framework.ops.progress import CatchUpProgress
from framework.ops.status import AppStatus, HandoffStatus


def sample(t2: int, phase: str = "CATCHING_UP") -> AppStatus:
    handoff = HandoffStatus(0, 2, phase, [("w", 2, 1000, t2, None), ("w", 6, 1000, t2, None)])
    return AppStatus("app", 0, 2, [], {}, 3, [handoff])


def test_rate_and_eta_from_two_samples() -> None:
    progress = CatchUpProgress()
    first = progress.update(sample(200), now=10.0)[0]
    assert first.rate is None and first.eta is None
    assert first.fraction == 0.2
    second = progress.update(sample(600), now=12.0)[0]
    assert second.rate == 400.0  # (1200 - 400) records over 2 s
    assert second.eta == 2.0  # 800 left at 400/s
    line = second.render()
    assert line.startswith("processor 2 <- 0 CATCHING_UP [############--------]  60%")
    assert "T2 1,200 of 2,000  400/s  ETA 2s" in line


def test_released_handoffs_aim_at_f() -> None:
    handoff = HandoffStatus(0, 2, "RELEASED", [("w", 2, 900, 950, 1000)])
    done = CatchUpProgress().update(AppStatus("app", 0, 2, [], {}, 3, [handoff]))[0]
    assert (done.done, done.goal) == (950, 1000)
