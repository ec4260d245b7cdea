"""The processor's warning about input records it dead-lettered because their producer does not
place keys by linear hashing (no ``splitstate.count`` header, and no partition count of the
topic places the key where the record is): at most one line per input partition per
``WARN_EVERY_SECONDS``, from the counts of committed batches (looked at every
``_CHECK_SECONDS``, and as the run ends), never one per record."""

from __future__ import annotations

import logging

from framework.clock import Clock
from framework.growth.placement import UNPLACED_CAUSE, UNPLACED_FIX, UNPLACED_SCOPE
from framework.processing import RecordProcessor

__all__ = ["WARN_EVERY_SECONDS", "UnplacedWarnings"]

# the processor's lines keep the loop's logger name
log = logging.getLogger("framework.runtime.loop")

#: a partition's warning is repeated (with the records since) at most this often
WARN_EVERY_SECONDS = 60.0
#: how often ``tick`` looks at the counts
_CHECK_SECONDS = 5.0


class UnplacedWarnings:
    """Warns of the records ``records`` dead-lettered as unplaced since its last warning of
    their partition; records counted before it was made (by earlier runs) are not warned of
    again (``splitstate status`` shows them all)."""

    def __init__(
        self, processor: int, records: RecordProcessor, clock: Clock, dead_letter_topic: str
    ) -> None:
        self._processor = processor
        self._records = records
        self._clock = clock
        self._dead_letter_topic = dead_letter_topic
        self._warned = records.placement.counts(UNPLACED_SCOPE)
        self._quiet_until: dict[tuple[str, int], float] = {}
        self._due = clock.monotonic() + _CHECK_SECONDS

    def tick(self) -> None:
        """``check`` when due (cheap when not: between the loop's steps)."""
        now = self._clock.monotonic()
        if now >= self._due:
            self._due = now + _CHECK_SECONDS
            self.check()

    def check(self) -> None:
        """Warn of each partition with new such records, unless warned of in the last
        ``WARN_EVERY_SECONDS`` (then its records wait for a later check)."""
        now = self._clock.monotonic()
        for (topic, partition), count in sorted(
            self._records.placement.counts(UNPLACED_SCOPE).items()
        ):
            position = (topic, partition)
            new = count - self._warned.get(position, 0)
            if new <= 0 or now < self._quiet_until.get(position, float("-inf")):
                continue
            log.warning(
                "processor %d dead-lettered %d record%s of %s[%d] (stage placement; %d in all "
                "so far): without a splitstate.count header, and where linear hashing does "
                "not place their keys (each dead letter's splitstate.error says where it "
                "does), so processing them would split their keys' state across processors. "
                "They were %s. Fix: %s; then send them again from the dead-letter topic %s.",
                self._processor,
                new,
                "" if new == 1 else "s",
                topic,
                partition,
                count,
                UNPLACED_CAUSE,
                UNPLACED_FIX,
                self._dead_letter_topic,
            )
            self._warned[position] = count
            self._quiet_until[position] = now + WARN_EVERY_SECONDS
