"""The deterministic simulation: many seeded adversarial schedules of the real protocol code.

``SIM_SEEDS=N`` runs N schedules (default 1,000, the CI budget), split over two processes
(``python -m tests.sim.runner``, which fixes the hash seed so a seed replays exactly). A
failure prints the plan, what happened, the broken invariants, the smallest failing variant
the shrinker found, and the command that replays it: ``pytest tests/sim -k replay --seed N``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sim.regressions import REGRESSIONS
from tests.sim.runner import KEPT_HEADER
from tests.sim.time_regressions import TIME_REGRESSIONS, UNFIXED

SEEDS = int(os.environ.get("SIM_SEEDS", "1000"))
WORKERS = 2
ROOT = Path(__file__).resolve().parents[2]


def _runner(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.sim.runner", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONHASHSEED": "0"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(runs: list[subprocess.Popen[str]]) -> None:
    outputs = [run.communicate(timeout=1500)[0] for run in runs]
    report = "\n".join(outputs)
    print(report)
    if any(run.returncode for run in runs):
        pytest.fail(report[-20_000:], pytrace=False)


@pytest.mark.timeout(1800)  # two runner processes beside the other xdist worker's tests
def test_seeded_schedules_hold_every_invariant() -> None:
    share = -(-SEEDS // WORKERS)
    runs = [
        _runner("--first", str(first), "--count", str(min(share, SEEDS - first)))
        for first in range(0, SEEDS, share)
    ]
    _finish(runs)


_KEPT = re.compile(
    rf"^{re.escape(KEPT_HEADER)}(?P<name>\S+): (?P<verdict>ok|FAILED)$", re.MULTILINE
)


@pytest.fixture(scope="module")
def kept_runs() -> dict[str, tuple[str, str]]:
    """Every kept plan's verdict and report, from one runner process (``--kept``: a process
    per plan cost more in start-up than the plans take)."""
    run = _runner("--kept")
    output = run.communicate(timeout=1500)[0]
    headers = list(_KEPT.finditer(output))
    runs: dict[str, tuple[str, str]] = {}
    for header, after in zip(headers, [*headers[1:], None], strict=True):
        report = output[header.end() : after.start() if after else len(output)].strip("\n")
        runs[header["name"]] = (header["verdict"], report)
    runs["(runner)"] = (f"exit {run.returncode}", output[-20_000:])
    return runs


def _check_kept(runs: dict[str, tuple[str, str]], name: str) -> None:
    if name not in runs:
        verdict, output = runs["(runner)"]
        pytest.fail(f"no result for kept plan {name} (runner {verdict}):\n{output}", pytrace=False)
    verdict, report = runs[name]
    print(report)
    if verdict != "ok":
        pytest.fail(report[-20_000:], pytrace=False)


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_kept_schedules_that_once_found_a_defect(
    kept_runs: dict[str, tuple[str, str]], name: str
) -> None:
    _check_kept(kept_runs, name)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=UNFIXED[name]))
        if name in UNFIXED
        else name
        for name in sorted(TIME_REGRESSIONS)
    ],
)
def test_kept_timed_schedules_that_once_found_a_defect(
    kept_runs: dict[str, tuple[str, str]], name: str
) -> None:
    _check_kept(kept_runs, name)


def test_replay(request: pytest.FixtureRequest) -> None:
    seed = request.config.getoption("--seed")
    if seed is None:
        pytest.skip("give --seed N to replay schedule N")
    _finish([_runner("--seed", str(seed), "--verbose")])
