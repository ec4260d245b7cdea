"""Put known defects back, one at a time, and report which simulation seed finds each.

Each ``bench/mutations/NAME.patch`` undoes one fix (issue 12's defects and the ones the
simulation found since). For each, the script copies the working tree's files (tracked and
untracked, as they are now) to a scratch directory, applies the patch there, and runs the
CI's seeds of the simulation (``python -m tests.sim.runner``) on two processes, each
stopping at its first failure. It prints a table: the first failing seed of each half, the
wall time, and the first broken invariant. A mutation no seed finds is a hole in the
simulation's fault model.

    .venv/bin/python bench/mutations.py                      # every patch, seeds 0..999
    .venv/bin/python bench/mutations.py --seeds 400 lease    # patches whose name has "lease"

A patch that no longer applies (the code moved) is reported as such: rewrite it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATCHES = ROOT / "bench" / "mutations"
WORKERS = 2
_SEED = re.compile(r"^seed (\d+):", re.MULTILINE)
_PROBLEM = re.compile(r"^\s+(?:PROBLEM|halted): (.*)$", re.MULTILINE)


@dataclass
class Result:
    """What the seeds said of one mutation."""

    name: str
    firsts: list[str]
    seconds: float
    shows: str


def _run_half(tree: Path, first: int, count: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(tree)}
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "tests.sim.runner", "--stop-first", "--no-shrink"),
            *("--first", str(first), "--count", str(count)),
        ],
        cwd=tree,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _copy_tree(tree: Path) -> None:
    """The working tree's files that git tracks or would track, copied to ``tree``."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            target = tree / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    subprocess.run(["git", "init", "--quiet"], cwd=tree, check=True)


def run_mutation(patch: Path, seeds: int) -> Result:
    """Apply ``patch`` to a scratch copy of the working tree and run ``seeds`` schedules."""
    name = patch.name.removesuffix(".patch")
    with tempfile.TemporaryDirectory(prefix="splitstate-mutant-") as scratch:
        tree = Path(scratch) / "tree"
        _copy_tree(tree)
        applied = subprocess.run(
            ["git", "apply", str(patch)], check=False, cwd=tree, capture_output=True, text=True
        )
        if applied.returncode:
            return Result(name, ["-", "-"], 0.0, f"patch does not apply: {applied.stderr}")
        started = time.monotonic()
        share = -(-seeds // WORKERS)
        runs = [
            _run_half(tree, first, min(share, seeds - first)) for first in range(0, seeds, share)
        ]
        outputs = [run.communicate()[0] for run in runs]
        seconds = time.monotonic() - started
    firsts, shows = [], ""
    for run, output in zip(runs, outputs, strict=True):
        found = _SEED.search(output) if run.returncode else None
        firsts.append(found.group(1) if found else "not found")
        if found and not shows:
            problem = _PROBLEM.search(output)
            shows = problem.group(1)[:90] if problem else output.strip().splitlines()[-1][:90]
    return Result(name, firsts, seconds, shows)


def main() -> int:
    """Run the mutations the arguments select; print the table."""
    parser = argparse.ArgumentParser(prog="bench/mutations.py")
    parser.add_argument("--seeds", type=int, default=1000, help="schedules per mutation")
    parser.add_argument("names", nargs="*", help="only patches whose name contains one of these")
    args = parser.parse_args()
    patches = sorted(PATCHES.glob("*.patch"))
    if args.names:
        patches = [p for p in patches if any(n in p.name for n in args.names)]
    print(f"{len(patches)} mutations, seeds 0..{args.seeds - 1} on {WORKERS} processes")
    print("| mutation | first failing seeds (halves) | wall time | how it shows |")
    print("| --- | --- | --- | --- |")
    missed = 0
    for patch in patches:
        result = run_mutation(patch, args.seeds)
        missed += result.firsts == ["not found"] * len(result.firsts)
        print(
            f"| {result.name} | {' / '.join(result.firsts)} | {result.seconds:.0f} s "
            f"| {result.shows} |",
            flush=True,
        )
    print(f"{len(patches) - missed} of {len(patches)} found")
    return 0


if __name__ == "__main__":
    sys.exit(main())
