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


#: modules only Spark builds and snapshot stores use: a processor imports them when it runs one
#: (about a quarter of a start's CPU: ~0.23 of ~0.83 CPU-s)
BUILD_AND_STORE = ("framework.bootstrap.build", "framework.bootstrap.fold", "pyarrow", "numpy")


def test_a_processor_start_imports_neither_the_spark_build_nor_pyarrow_nor_numpy() -> None:
    """A processor imports ``framework.bootstrap.child_process`` (it may start a Spark build in
    a child process) and the snapshot modules, not the build itself nor pyarrow (a snapshot
    store imports it when one is made) nor numpy (``rebalance.bucket_array``, Spark's)."""
    probe = (
        "import sys\n"
        "import framework.ops.cli, framework.runtime.loop, examples.wordcount.app\n"
        f"print(sorted(m for m in sys.modules if m in {BUILD_AND_STORE!r}))\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert found.stdout.strip() == "[]", found.stdout
