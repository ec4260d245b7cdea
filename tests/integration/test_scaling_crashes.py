"""Crash safety of the catch-up protocol at exact steps (SPLITSTATE_FAULT kills a processor
once, right before or after it writes a handoff event). Scale 2 -> 3 under continuous
production; every word's counts are exactly 1..n afterwards (outputs may repeat, state not)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.integration.harness import counts_by_word
from tests.integration.test_scaling import ScalingRun, scale_to, wait_for_generation

pytestmark = pytest.mark.integration

FAULTS = {
    "joiner dies while catching up": "2:after:START_CATCH_UP",
    "joiner dies right after READY": "2:after:CAUGHT_UP",
    "old owner dies after READY, before RELEASE is written": "0:before:RELEASE",
    "old owner dies right after RELEASE": "0:after:RELEASE",
    "joiner dies between RELEASED and ACTIVE": "2:before:COMPLETE",
}


@pytest.mark.parametrize("fault", list(FAULTS.values()), ids=list(FAULTS))
def test_crash_at_each_step(
    tmp_path: Path, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    monkeypatch.setenv("SPLITSTATE_FAULT", fault)
    run = ScalingRun(tmp_path, kafka_bootstrap)
    try:
        run.start_flowing()
        wait_for_generation(run.config, scale_to(run.config, 3))
        time.sleep(1)
        truth = run.finish()
    finally:
        status, log = run.stop()
    assert status == 0, log[-3000:]
    victim = fault.split(":", maxsplit=1)[0]
    assert f"processor {victim} exited with status -9; restarting" in log, log[-3000:]
    seen = counts_by_word(run.reader.records)
    for word, n in truth.items():
        assert set(seen[word]) == set(range(1, n + 1)), (word, n, sorted(seen[word])[:5])
    assert os.path.exists(
        tmp_path / "state" / f".fault-{victim}-{fault.split(':', 1)[1].replace(':', '-')}"
    )
