"""Running Python's cycle collector less often while a processor loops.

Every record makes short-lived objects (its message, record, outputs, state values) that
reference counting frees at once; the cycle collector still counts each allocation and scans
the young objects every 700 of them, which took about a tenth of the loop's time in
``bench/throughput.py``. While the loop runs, the objects made before it (modules, the app,
clients) are moved out of the collector's sight (``gc.freeze``) and a young collection runs
every ``YOUNG_THRESHOLD`` allocations; both are put back afterwards. Cycles are still
collected, just later.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["YOUNG_THRESHOLD", "fewer_collections"]

#: allocations between young collections while the loop runs (Python's default: 700)
YOUNG_THRESHOLD = 50_000


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Collect cycles less often inside the block (and not among objects made before it)."""
    before = gc.get_threshold()
    freeze = gc.get_freeze_count() == 0  # else the process froze its own: leave them be
    if freeze:
        gc.freeze()
    gc.set_threshold(max(before[0], YOUNG_THRESHOLD), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
        if freeze:
            gc.unfreeze()
