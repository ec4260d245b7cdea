"""The timestamps of a timed plan's input records (``Plan.timed``): its event times.

A record's timestamp is when its producer queued it (simulated wall time, itself the same on
every run of a seed), less a delay drawn from the seed, the key and the value (a key's
``"<producer>:<seq>"`` names one record): a few ms mostly (a key's times mostly increase), up
to ``OUT_OF_ORDER_MS`` for ``OUT_OF_ORDER_RATE`` of them (out of order; past a window's
grace now and then), and ``LATE_MS`` for ``LATE_RATE`` of them (late: their windows closed
already once the key's time moved on). Records of other topics, and keyless ones (ticks,
markers), have none.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from tests.sim.app import INPUT

__all__ = ["LATE_MS", "LATE_RATE", "OUT_OF_ORDER_MS", "OUT_OF_ORDER_RATE", "event_delays"]

OUT_OF_ORDER_RATE = 0.15
OUT_OF_ORDER_MS = (100, 1_200)
LATE_RATE = 0.05
LATE_MS = (3_000, 8_000)
#: the delay of a record in order
_IN_ORDER_MS = (0, 20)

#: ``(topic, key, value) -> ms`` (``Broker.delay``)
Delay = Callable[[str, bytes | None, bytes | None], int]


def event_delays(seed: int) -> Delay:
    """How long before it was queued each record of seed ``seed`` happened (see the
    module)."""

    def delay(topic: str, key: bytes | None, value: bytes | None) -> int:
        if topic != INPUT or key is None or value is None:
            return 0
        draw = random.Random(f"{seed}/{key!r}/{value!r}")  # (a str seed: the same each run)
        share = draw.random()
        if share < LATE_RATE:
            return draw.randint(*LATE_MS)
        if share < LATE_RATE + OUT_OF_ORDER_RATE:
            return draw.randint(*OUT_OF_ORDER_MS)
        return draw.randint(*_IN_ORDER_MS)

    return delay
