"""What ``splitstate run`` imports before a processor starts: never Spark (only a bootstrap
imports it, late) nor ``rich``; either would add to every start. Checked in a fresh
interpreter, by module name, not timed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: top-level packages a processor's start must not import
HEAVY = ("pyspark", "py4j", "rich")


def test_a_processor_start_imports_no_spark_and_no_rich() -> None:
    probe = (
        "import sys\n"
        "import framework.ops.cli, framework.runtime.loop, examples.wordcount.app\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert found.stdout.strip() == "[]", found.stdout


def test_a_processor_start_imports_none_of_the_spark_builds_code() -> None:
    """A processor imports ``framework.bootstrap.child_process`` (it starts a Spark build in a
    child process), not the build itself (``build``, ``fold``: pyarrow's compute functions),
    nor does the command line (``splitstate backfill`` imports it when it runs)."""
    probe = (
        "import sys\n"
        "import framework.ops.cli, framework.runtime.loop, examples.wordcount.app\n"
        "print(sorted(m for m in sys.modules if m in "
        "('framework.bootstrap.build', 'framework.bootstrap.fold', 'pyarrow.compute')))\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert found.stdout.strip() == "[]", found.stdout
