"""The clock seam: the runtime, coordination, growth and producer code never reads time,
waits or starts threads but through a ``framework.clock.Clock``.

The deterministic simulation (``tests/sim``) runs that code on a simulated clock; a module
that imports ``time`` or ``threading`` (or another way to block or run in parallel) would
read real time or block the simulation's one thread. Read from the source with ``ast``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
SEAMED = ("framework/runtime", "framework/coordination", "framework/growth")
SEAMED_FILES = ("framework/producer.py",)

#: modules that read time, wait, or run work in parallel outside a Clock
FORBIDDEN = {
    "time",
    "threading",
    "_thread",
    "select",
    "selectors",
    "sched",
    "asyncio",
    "concurrent",
    "multiprocessing",
    "subprocess",
}


def _files() -> list[Path]:
    files = [path for folder in SEAMED for path in sorted((ROOT / folder).rglob("*.py"))]
    return files + [ROOT / name for name in SEAMED_FILES]


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.partition(".")[0])
    return names


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_seamed_code_reads_time_and_waits_only_through_the_clock(path: Path) -> None:
    found = _imported(path) & FORBIDDEN
    name = str(path.relative_to(ROOT))
    assert not found, (
        f"{name} imports {sorted(found)}: read time, sleep and start background work "
        "through a framework.clock.Clock (kafka.clock, or a clock argument) instead"
    )
