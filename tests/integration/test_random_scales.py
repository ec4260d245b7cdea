"""Random sequences of scales, out and in, through P > N after a growth, with a SIGKILL of a
random participant at a random protocol step in each scale. Afterwards every key's state is
its count, no processor holds a key it does not own, and every key's outputs hold each of
1..n in order with nothing missing (a value may repeat only where a kill cut a batch short).
Under exactly-once a processor is also killed right after a batch's transaction committed,
before its state did, and the outputs a ``read_committed`` reader sees are exactly 1..n.

The run's seed is printed in every failure; ``SPLITSTATE_SEED=N`` replays it.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from framework.coordination.scaling import request_scale
from framework.loader import load_app
from rebalance import TopicHistory, bucket, key_hash, plan_scale
from statestore import ProcessorDatabase, processor_path
from tests.integration.harness import counts_by_word, splitstate
from tests.integration.test_scaling import APP, ScalingRun, wait_for_generation

pytestmark = pytest.mark.integration

RECEIVER_POINTS = ("after:START_CATCH_UP", "after:CAUGHT_UP", "before:COMPLETE", "after:COMPLETE")
SOURCE_POINTS = ("before:RELEASE", "after:RELEASE")
LEASE = {"producer_lease_ms": 4000, "producer_delivery_timeout_ms": 3000}


def plan(rng: random.Random) -> tuple[list[int | str], list[str]]:
    """Steps (a processor count, or "grow") and one fault per scale."""
    first = rng.choice([3, 4])
    high = rng.choice([5, 6, 7, 8])
    low = rng.choice([p for p in range(2, high) if p != high])
    last = rng.choice([p for p in range(2, 9) if p != low])
    steps: list[int | str] = [first, "grow", high, low, last]
    faults = []
    current, partitions = 2, 4
    for step in steps:
        if step == "grow":
            partitions = 8
            continue
        assert isinstance(step, int)
        counts = [4] if partitions == 4 else [4, partitions]
        scale = plan_scale(2, [TopicHistory.of("words", counts)], current, step)
        sources = sorted({m.source for m in scale.moves})
        targets = sorted({m.target for m in scale.moves})
        if rng.random() < 0.5:
            faults.append(f"{rng.choice(targets)}:{rng.choice(RECEIVER_POINTS)}")
        else:
            faults.append(f"{rng.choice(sources)}:{rng.choice(SOURCE_POINTS)}")
        current = step
    return steps, faults


def in_order(values: list[int], n: int) -> bool:
    """Each of 1..n present, first occurrences ascending (repeats after a kill allowed)."""
    firsts: list[int] = []
    for value in values:
        if value not in firsts:
            firsts.append(value)
    return firsts == list(range(1, n + 1))


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_random_scales_with_a_kill_in_each(
    tmp_path: Path, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch, guarantee: str
) -> None:
    seed = int(os.environ.get("SPLITSTATE_SEED", random.randrange(1_000_000)))
    rng = random.Random(seed)
    steps, faults = plan(rng)
    if guarantee == "exactly-once":
        faults.append(f"{rng.randrange(2)}:batch:transaction-committed")
    monkeypatch.setenv("SPLITSTATE_FAULT", ",".join(faults))
    run = ScalingRun(
        tmp_path, kafka_bootstrap, partitions=4, lease=LEASE, processing_guarantee=guarantee
    )
    where = f"seed {seed}, steps {steps}, faults {faults}"
    processors = 2
    try:
        run.start_flowing()
        for step in steps:
            if step == "grow":
                grown = splitstate(
                    "expand", APP, "--config", str(run.config), "--topic", run.words,
                    "--partitions", "8", timeout=180,
                )  # fmt: skip
                assert grown.returncode == 0, (where, grown.stderr)
                continue
            assert isinstance(step, int)
            app = load_app(APP, run.config)
            generation = request_scale(app, step).generation
            try:
                wait_for_generation(run.config, generation, timeout=180)
            except AssertionError as error:
                raise AssertionError(f"{where}: {error}") from None
            processors = step
            run.reader.poll(0.5)
        time.sleep(2)
        truth = run.finish()
    finally:
        status, log = run.stop()
    assert status == 0, (where, log[-3000:])
    seen = counts_by_word(run.reader.records)
    for word, n in truth.items():
        if guarantee == "exactly-once":
            assert seen[word] == list(range(1, n + 1)), (where, word, n, seen[word])
        else:
            assert in_order(seen[word], n), (where, word, n, seen[word])
    owners: dict[int, dict[bytes, int]] = {}
    for j in range(processors):
        database = ProcessorDatabase.open_read_only(processor_path(tmp_path / "state", j))
        owners[j] = dict(database.items("counts"))
        database.close()
    for j, state in owners.items():
        strays = [k for k in state if bucket(key_hash(k), 2, processors) != j]
        assert not strays, (where, j, strays[:5])
    held = {key: n for state in owners.values() for key, n in state.items()}
    assert held == {w.encode(): n for w, n in truth.items()}, where
