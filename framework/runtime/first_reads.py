"""When a receiver's first records of the partitions it took over arrive.

The handoff pause of a moved partition ends with the new owner's first batch of it; the loop
logs when it began reading each partition it took over, and when that partition's first
records came back from Kafka (``bench/scale.py`` splits the pause into its parts with these
lines and the handoff events').
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from framework.clock import Clock
from framework.kafka import Message
from rebalance.positions import Position

__all__ = ["FirstReads"]

# the processor's lines keep the loop's logger name
log = logging.getLogger("framework.runtime.loop")


class FirstReads:
    """The partitions processor ``processor`` took over and has read no record of yet, each
    with when it began reading it (``clock``'s monotonic time)."""

    def __init__(self, processor: int, clock: Clock) -> None:
        self.processor = processor
        self._clock = clock
        self.waiting: dict[Position, float] = {}

    def began(self, positions: Iterable[Position]) -> None:
        """The consumer reads ``positions`` (taken over) from now on."""
        added = sorted(set(positions) - self.waiting.keys())
        if not added:
            return
        now = self._clock.monotonic()
        self.waiting.update(dict.fromkeys(added, now))
        log.info("processor %d: reads %s it took over", self.processor, added)

    def read(self, messages: Iterable[Message]) -> None:
        """Log the first records read of each partition still waiting for them."""
        if not self.waiting:
            return
        now = self._clock.monotonic()
        for message in messages:
            topic, partition = message.topic(), message.partition()
            if topic is None or partition is None:
                continue
            began = self.waiting.pop((topic, partition), None)
            if began is not None:
                log.info(
                    "processor %d: first records of %s it took over read %.0f ms after it "
                    "began reading it",
                    self.processor,
                    [(topic, partition)],
                    (now - began) * 1000,
                )
                if not self.waiting:
                    return

    def forget(self, positions: Iterable[Position]) -> None:
        """Stop waiting for ``positions`` (no longer read)."""
        for position in positions:
            self.waiting.pop(position, None)
