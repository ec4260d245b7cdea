"""The order in which `make test`'s two xdist workers take test files (``--dist loadfile``).

xdist's loadfile scheduling hands out whole files, most tests first. The files that take
longest have few tests (an integration scenario is one or two long tests), so they came last,
and the run ended with one worker on a long file while the other had nothing left. Handing the
longest files out first (longest processing time first) lets the many short files fill in
around them at the end. Only the order changes: every test still runs, each file whole on one
worker.
"""

from __future__ import annotations

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadFileScheduling
from xdist.workermanage import WorkerController

__all__ = ["LONGEST_FILES", "LongestFilesFirst"]

#: the test files that took longest in a whole run on two workers (a 2-core machine), longest
#: first; a file not listed keeps xdist's place for it, after these
LONGEST_FILES = (
    "tests/sim/test_simulation.py",
    "tests/integration/test_compacted_history.py",
    "tests/integration/test_backfill.py",
    "tests/integration/test_snapshots.py",
    "tests/integration/test_growth_scaling.py",
    "tests/framework/test_spark_time.py",
    "tests/framework/test_spark_job.py",
    "tests/integration/test_shrink_command.py",
    "tests/integration/test_scaling_crashes.py",
    "tests/integration/test_oversized_and_crashes.py",
    "tests/integration/test_shrink.py",
    "tests/integration/test_ticks.py",
    "tests/integration/test_random_scales.py",
    "tests/integration/test_growth.py",
)


class LongestFilesFirst(LoadFileScheduling):  # type: ignore[misc]  # xdist has no type hints
    """Loadfile scheduling that hands out ``LONGEST_FILES`` first, in their order."""

    def __init__(self, config: pytest.Config, log: Producer | None = None) -> None:
        super().__init__(config, log)
        self._longest_moved = False

    def _assign_work_unit(self, node: WorkerController) -> None:
        if not self._longest_moved:
            for scope in reversed(LONGEST_FILES):
                if scope in self.workqueue:
                    self.workqueue.move_to_end(scope, last=False)
            self._longest_moved = True
        super()._assign_work_unit(node)
