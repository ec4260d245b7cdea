"""Put known defects back, one at a time, and report which simulation seed finds each.

Each ``bench/mutations/NAME.patch`` undoes one fix (issue 12's defects and the ones the
simulation found since). For each, the script copies the working tree's files (tracked and
untracked, as they are now) to a scratch directory, applies the patch there, and runs the
CI's seeds of the simulation (``python -m tests.sim.runner``) on two processes, each
stopping at its first failure. It prints a table: the first failing seed of each half, the
wall time, and the first broken invariant. A mutation no seed finds is a hole in the
simulation's fault model (some are found by a focused test or a kept plan instead).

Seeds that fail on the working tree as it is (defects not fixed yet) would "find" every
mutation: the script runs the seeds on the unpatched tree first and skips those that fail
there (``--no-baseline`` trusts that none does).

    .venv/bin/python bench/mutations.py                      # every patch, seeds 0..999
    .venv/bin/python bench/mutations.py --seeds 400 lease    # patches whose name has "lease"

A patch that no longer applies (the code moved) is reported as "does not apply", counted
apart from those found and not found, and the script exits 1: rewrite it.
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
    """What the seeds said of one mutation (``applied``: whether its patch applied)."""

    name: str
    firsts: list[str]
    seconds: float
    shows: str
    applied: bool = True

    @property
    def found(self) -> bool:
        """Whether a seed failed with the defect put back."""
        return self.applied and any(first.isdigit() for first in self.firsts)


def _run_half(
    tree: Path, first: int, count: int, skip: frozenset[int], *, stop_first: bool
) -> tuple[subprocess.Popen[str], Path]:
    """One half of the seeds in ``tree``; its output goes to the file returned (a pipe
    would hold this half back whenever the other one is read first)."""
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(tree)}
    stop = ["--stop-first"] if stop_first else []
    skipped = ["--skip", ",".join(map(str, sorted(skip)))] if skip else []
    output = tree.parent / f"seeds-{first}.log"
    with output.open("w") as sink:
        run = subprocess.Popen(
            [
                *(sys.executable, "-m", "tests.sim.runner", *stop, "--no-shrink"),
                *("--first", str(first), "--count", str(count), *skipped),
            ],
            cwd=tree,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
        )
    return run, output


def _halves(
    tree: Path, seeds: int, skip: frozenset[int], *, stop_first: bool
) -> list[tuple[int, str]]:
    """The exit code and output of each of the seeds' two halves, run side by side in
    ``tree``."""
    share = -(-seeds // WORKERS)
    runs = [
        _run_half(tree, first, min(share, seeds - first), skip, stop_first=stop_first)
        for first in range(0, seeds, share)
    ]
    return [(run.wait(), output.read_text()) for run, output in runs]


def baseline(seeds: int) -> frozenset[int]:
    """The seeds that fail on the working tree as it is (no patch)."""
    with tempfile.TemporaryDirectory(prefix="splitstate-mutant-") as scratch:
        tree = Path(scratch) / "tree"
        _copy_tree(tree)
        outputs = _halves(tree, seeds, frozenset(), stop_first=False)
    return frozenset(int(m.group(1)) for _code, o in outputs for m in _SEED.finditer(o))


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


def run_mutation(patch: Path, seeds: int, skip: frozenset[int] = frozenset()) -> Result:
    """Apply ``patch`` to a scratch copy of the working tree and run ``seeds`` schedules
    (but the seeds of ``skip``)."""
    name = patch.name.removesuffix(".patch")
    with tempfile.TemporaryDirectory(prefix="splitstate-mutant-") as scratch:
        tree = Path(scratch) / "tree"
        _copy_tree(tree)
        applied = subprocess.run(
            ["git", "apply", str(patch)], check=False, cwd=tree, capture_output=True, text=True
        )
        if applied.returncode:
            why = " ".join(applied.stderr.split())[:90]
            return Result(name, ["does not apply"], 0.0, why, applied=False)
        started = time.monotonic()
        outputs = _halves(tree, seeds, skip, stop_first=True)
        seconds = time.monotonic() - started
    firsts, shows = [], ""
    for code, output in outputs:
        found = _SEED.search(output)
        if found is None and code:  # the runner itself failed: say how, not "not found"
            firsts.append("error")
            shows = shows or output.strip().splitlines()[-1][:90]
            continue
        firsts.append(found.group(1) if found else "not found")
        if found and not shows:
            problem = _PROBLEM.search(output)
            shows = problem.group(1)[:90] if problem else output.strip().splitlines()[-1][:90]
    return Result(name, firsts, seconds, shows)


def main() -> int:
    """Run the mutations the arguments select; print the table. 1 when a patch does not
    apply."""
    parser = argparse.ArgumentParser(prog="bench/mutations.py")
    parser.add_argument("--seeds", type=int, default=1000, help="schedules per mutation")
    parser.add_argument(
        "--no-baseline", action="store_true", help="do not run the unpatched tree's seeds first"
    )
    parser.add_argument("names", nargs="*", help="only patches whose name contains one of these")
    args = parser.parse_args()
    patches = sorted(PATCHES.glob("*.patch"))
    if args.names:
        patches = [p for p in patches if any(n in p.name for n in args.names)]
    print(f"{len(patches)} mutations, seeds 0..{args.seeds - 1} on {WORKERS} processes")
    skip: frozenset[int] = frozenset()
    if not args.no_baseline:
        started = time.monotonic()
        skip = baseline(args.seeds)
        listed = ", ".join(map(str, sorted(skip))) or "none"
        print(
            f"seeds failing without a patch (skipped): {listed} "
            f"({time.monotonic() - started:.0f} s)",
            flush=True,
        )
    print("| mutation | first failing seeds (halves) | wall time | how it shows |")
    print("| --- | --- | --- | --- |")
    results = []
    for patch in patches:
        result = run_mutation(patch, args.seeds, skip)
        results.append(result)
        print(
            f"| {result.name} | {' / '.join(result.firsts)} | {result.seconds:.0f} s "
            f"| {result.shows} |",
            flush=True,
        )
    found = sum(r.found for r in results)
    stale = sum(not r.applied for r in results)
    applied = len(results) - stale
    print(
        f"{found} of {applied} applied patches found by a seed, {applied - found} not; "
        f"{stale} of {len(results)} do not apply"
    )
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
