"""Crash safety: SIGKILL a writer at random moments; state always equals the fold of exactly
the records up to the stored offsets (never half a batch, never a record twice)."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from statestore import ProcessorDatabase
from tests.statestore.crash_worker import IDENTITY, STORES, TOPIC, expected_state

KILLS = 15
#: kills go on past ``KILLS`` until this many batches were applied (a loaded machine applies
#: fewer per kill), up to ``MOST_KILLS``
BATCHES = 2000
MOST_KILLS = 150


def test_sigkill_leaves_state_at_a_batch_boundary(tmp_path: Path) -> None:
    directory = tmp_path / "processor-0"
    rng = random.Random(4)
    previous = 0
    progress: list[int] = []
    total_batches = 0
    while len(progress) < KILLS or (total_batches <= BATCHES and len(progress) < MOST_KILLS):
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.statestore.crash_worker", str(directory)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        ready = child.stdout.readline()
        assert ready.startswith("ready "), ready
        assert int(ready.split()[1]) == previous  # resumes exactly where the state says
        time.sleep(rng.uniform(0.02, 0.3))
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)

        with ProcessorDatabase.open(directory, IDENTITY, STORES) as database:
            offsets = database.offsets()
            end = offsets.get((TOPIC, 0), 0)
            states, batches = expected_state(end)
            assert offsets.get((TOPIC, 1), 0) == batches
            assert dict(database.items("fold")) == states
        assert end >= previous
        progress.append(end)
        previous = end
        total_batches = batches
    print(f"records per kill: {progress}; batches in all: {total_batches}")
    assert total_batches > BATCHES, progress  # thousands of batches were applied
