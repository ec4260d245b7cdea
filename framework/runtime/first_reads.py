"""A receiver's first reads of the partitions it took over.

The handoff pause of a moved partition ends with the new owner's first batch of it. Until
that partition's first records came back, the loop's batches wait only briefly for records
(``wait``): its backlog since F is there to read, and waiting for a fuller batch of the
processor's other partitions would hold it back. The loop logs when it began reading each
partition it took over, and when that partition's first records came back from Kafka
(``bench/scale.py`` splits the pause into its parts with these lines and the handoff
events').
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
#: how long a batch waits for records while a partition taken over has had none yet
TAKEOVER_WAIT_SECONDS = 0.01
#: for how long after a takeover batches wait that briefly, at most
_HURRY_SECONDS = 1.0
#: after how long a partition taken over that had no records is no longer looked for
_WATCH_SECONDS = 30.0


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

    def wait(self, wait: float) -> float:
        """How long the next batch may wait for records: ``wait``, or at most 10 ms while a
        partition taken over within the last second has had no records yet."""
        if not self.waiting:
            return wait
        now = self._clock.monotonic()
        if now - max(self.waiting.values()) < _HURRY_SECONDS:
            return min(wait, TAKEOVER_WAIT_SECONDS)
        for position, began in list(self.waiting.items()):
            if now - began > _WATCH_SECONDS:  # an idle partition: no longer looked for
                del self.waiting[position]
        return wait

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
