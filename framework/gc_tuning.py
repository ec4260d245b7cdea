"""Running Python's cycle collector less often while a processor loops (or a Spark bootstrap
folds a group of records).

Every record makes short-lived objects (its message, record, outputs, state values) that
reference counting frees at once; the cycle collector still counts each allocation and scans
the young objects every 700 of them, which took about a tenth of the loop's time in
``bench/throughput.py``. While a loop runs, a young collection runs every
``YOUNG_THRESHOLD`` allocations instead; the threshold is put back when the last loop of the
process ends (several loops may run in one process, e.g. in tests). Cycles are still
collected, just later: the runtime's own objects avoid making them (a batch drops its store
views when it commits).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["YOUNG_THRESHOLD", "fewer_collections"]

#: allocations between young collections while the loop runs (Python's default: 700)
YOUNG_THRESHOLD = 50_000

_loops = 0  # loops running in this process
_before = gc.get_threshold()


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Collect cycles less often inside the block."""
    global _loops, _before  # noqa: PLW0603 - one setting per process
    if _loops == 0:
        _before = gc.get_threshold()
        gc.set_threshold(max(_before[0], YOUNG_THRESHOLD), *_before[1:])
    _loops += 1
    try:
        yield
    finally:
        _loops -= 1
        if _loops == 0:
            gc.set_threshold(*_before)
