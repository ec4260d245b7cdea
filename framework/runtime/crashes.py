"""Records that kill the processor: find them, count their crashes, and skip them at a limit.

A record that makes the process die (the function exits, segfaults, runs out of memory, or
hangs until it is killed) cannot be caught in the process; without help the supervisor would
restart it into the same record forever. So, per batch, the runtime writes in the state store
which input ranges it is about to run the processor function on (``crash/attempt``: one small
RocksDB write, and one to clear it once every record of the batch has run):

- a start that finds an attempt left behind knows that the previous run died inside one of
  those ranges (the batch never committed, so processing resumes at their first offsets);
  the records in them become *suspects*; a crash while the function ran on a single record
  counts one crash against that record (a crash amid many records names none of them, so a
  good record next to a bad one is never skipped);
- while such *suspect* ranges remain, the runtime processes one record per batch, so that a
  further crash names its record exactly;
- a record that crashed the processor ``crash_limit`` times is not run again: it becomes a
  dead letter (stage ``crash``) and is skipped, recorded in the state store
  (``crash/skipped/...``, shown by ``splitstate status``) with the batch that skips it; with
  ``on_error: stop`` the processor stops instead, naming the record.

Deaths after the function has run (producing, committing) are not the records' doing and
are not counted; neither is a stop of ``on_error: stop``.

A receiver's catch-up runs the function too (in restore mode, on the keys it gains), so it
keeps its own guard (``crash/attempt/<catch-up>``): a record that killed the old owner kills
the receiver as well, and without the guard the receiver would restart into it forever and
the scale never finish. There it is skipped without a dead letter (the old owner wrote one).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

import orjson

from framework.clock import Clock
from framework.processing import DeadLetter, InputMessage
from rebalance.positions import Position
from statestore import META_STORE, ProcessorDatabase, StateBatch
from statestore.layout import CRASH_ATTEMPT_KEY, CRASH_SKIPPED_PREFIX

__all__ = ["CrashGuard", "SkippedRecord", "Suspect", "skipped_records"]

log = logging.getLogger(__name__)


@dataclass
class Suspect:
    """Records ``first..last`` of a partition were in flight at ``crashes`` crashes each."""

    first: int
    last: int
    crashes: int


@dataclass(frozen=True)
class SkippedRecord:
    """An input record skipped because it crashed the processor ``crashes`` times."""

    topic: str
    partition: int
    offset: int
    crashes: int
    at: float


class CrashGuard:
    """One processor run's view of crashes: suspects from the last run, attempts, skips.

    ``clock`` dates the skips (the run's clock). A receiver's catch-up keeps its own guard:
    its attempts under ``attempt_key``, its suspects trimmed by its own progress
    (``offsets``; the input offsets by default).
    """

    def __init__(
        self,
        database: ProcessorDatabase,
        limit: int,
        processor: int,
        *,
        clock: Clock,
        attempt_key: bytes = CRASH_ATTEMPT_KEY,
        offsets: Mapping[Position, int] | None = None,
    ) -> None:
        self.limit = limit
        self._clock = clock
        self._backend = database.backend
        self._processor = processor
        self._attempt_key = attempt_key
        self.suspects: dict[Position, Suspect] = {}
        raw = self._backend.get(META_STORE, attempt_key)
        if raw is None:
            return
        if offsets is None:
            offsets = database.offsets()
        for topic, partition, first, last, crashes in orjson.loads(raw)["ranges"]:
            committed = offsets.get((topic, partition))
            start = first if committed is None else max(first, committed)
            if start <= last:
                counted = crashes + 1 if first == last else crashes  # only a lone record's
                self.suspects[(topic, partition)] = Suspect(start, last, counted)
                log.warning(
                    "processor %d: the previous run died while processing %s[%d] offsets "
                    "%d..%d (crash %d of records there); processing them one at a time",
                    processor,
                    topic,
                    partition,
                    start,
                    last,
                    counted,
                )

    def careful(self, owned: set[Position]) -> bool:
        """Whether to process one record per batch (suspect ranges remain in ``owned``)."""
        if self.suspects:
            for position in self.suspects.keys() - owned:
                del self.suspects[position]
        return bool(self.suspects)

    def crashes(self, topic: str, partition: int, offset: int) -> int:
        """How many times the record at ``offset`` crashed the processor."""
        suspect = self.suspects.get((topic, partition))
        if suspect is None or not suspect.first <= offset <= suspect.last:
            return 0
        return suspect.crashes

    def attempt(self, ranges: dict[Position, list[int]]) -> None:
        """Record that the function runs on ``ranges`` (position -> [first, last]) now."""
        entries = [
            [topic, partition, first, last, self.crashes(topic, partition, first)]
            for (topic, partition), (first, last) in ranges.items()
        ]
        self._backend.write({META_STORE: [(self._attempt_key, orjson.dumps({"ranges": entries}))]})

    def survived(self) -> None:
        """The function ran on every record of the attempt (or stopped by policy)."""
        self._backend.write({META_STORE: [(self._attempt_key, None)]})

    def committed(self, next_offsets: dict[Position, int]) -> None:
        """A batch committed: forget suspects it moved past."""
        for position, next_offset in next_offsets.items():
            suspect = self.suspects.get(position)
            if suspect is not None:
                suspect.first = next_offset
                if next_offset > suspect.last:
                    del self.suspects[position]

    def skip(
        self,
        batch: StateBatch,
        message: InputMessage,
        where: tuple[str, int, int],
        dead_letter_topic: str,
        restore: bool,
    ) -> DeadLetter | None:
        """Skip the record at ``where`` with ``batch``: its dead letter (``None`` when only
        rebuilding state: it was dead-lettered when first processed)."""
        topic, partition, offset = where
        crashes = self.crashes(topic, partition, offset)
        detail = {"crashes": crashes, "at": round(self._clock.time(), 3)}
        batch.record_skip(topic, partition, offset, orjson.dumps(detail))
        log.error(
            "processor %d: %s[%d]@%d (key %r) killed the processor %d times; it is skipped%s",
            self._processor,
            topic,
            partition,
            offset,
            message.key(),
            crashes,
            "" if restore else f" and goes to the dead-letter topic {dead_letter_topic}",
        )
        if restore:
            return None
        reason = (
            f"killed the processor {crashes} times (the process died while the function ran "
            "on this record: it exited, crashed, ran out of memory or was killed); skipped "
            "after crash_limit crashes. Its state changes were not applied."
        )
        return DeadLetter.of(message, where, "crash", reason)


def skipped_records(database: ProcessorDatabase) -> list[SkippedRecord]:
    """The records skipped after crashes, as recorded in ``database``, oldest offset first."""
    end = CRASH_SKIPPED_PREFIX[:-1] + bytes([CRASH_SKIPPED_PREFIX[-1] + 1])
    found = []
    for key, value in database.backend.scan(META_STORE, CRASH_SKIPPED_PREFIX, end):
        where = key[len(CRASH_SKIPPED_PREFIX) :].decode()
        topic_partition, _, offset = where.rpartition("/")
        topic, _, partition = topic_partition.rpartition("/")
        detail = orjson.loads(value)
        found.append(
            SkippedRecord(
                topic, int(partition), int(offset), int(detail["crashes"]), float(detail["at"])
            )
        )
    return found
