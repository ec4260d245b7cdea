"""A virtualenv with Quix Streams for benchmarks to compare with, made on demand.

Quix Streams is no dependency of the project: it pins its own confluent-kafka (3.28.1:
``confluent-kafka<2.13``, the project uses 2.16), so it gets a virtualenv of its own under the
clone's ``.cache/`` (ignored by git), with the pinned version from the package index. Its
scripts import nothing of the project and run as subprocesses with that virtualenv's Python.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["QUIX_VERSION", "QuixPython", "quix_python"]

#: the Quix Streams version the benchmarks compare with
QUIX_VERSION = "3.28.1"
ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class QuixPython:
    """The Python to run Quix scripts with and its Quix version, or ``None`` and why not."""

    python: Path | None
    version: str
    why: str = ""


def quix_python(version: str = QUIX_VERSION, cache: Path | None = None) -> QuixPython:
    """The Python of ``.cache/quix-streams-VERSION`` (made when missing or broken)."""
    venv = (cache or ROOT / ".cache") / f"quix-streams-{version}"
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import quixstreams; print(quixstreams.__version__)"]
    if python.exists():
        found = subprocess.run(probe, capture_output=True, text=True, check=False)
        if found.returncode == 0 and found.stdout.strip() == version:
            return QuixPython(python, version)
    print(f"installing quixstreams=={version} into {venv} ...", flush=True)
    steps = [
        [sys.executable, "-m", "venv", "--clear", str(venv)],
        [str(python), "-m", "pip", "install", "--quiet", f"quixstreams=={version}"],
        probe,
    ]
    for step in steps:
        try:
            done = subprocess.run(step, capture_output=True, text=True, check=False, timeout=900)
        except (OSError, subprocess.TimeoutExpired) as error:
            return QuixPython(None, version, f"{' '.join(step[:4])}: {error}")
        if done.returncode != 0:
            return QuixPython(None, version, f"{' '.join(step[:4])} failed: {_last(done)}")
    return QuixPython(python, version)


def _last(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in (done.stderr or done.stdout).strip().splitlines() if line.strip()]
    return lines[-1].strip()[:200] if lines else "(no output)"
