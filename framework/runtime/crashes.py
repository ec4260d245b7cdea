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

A tick (``framework.time.ticks``) changes many keys: one key's timer or window result that
kills the process must not cost the others the tick, or a receiver gaining only those would
apply it where the owner did not. So a lone tick's death counts against nothing unless its
items are *watched* (``watch``: the attempt names the key and due item firing now, a write
per item, only while suspects remain: ``framework.runtime.tick_guard``); then it counts
against that key's item, and an item that killed the processor ``crash_limit`` times is
dropped as failed (a dead letter, stage ``timer`` or ``window``, as if its function had
raised; recorded, ``skip_items``): the tick applies to that key without it, and to every other
key. A death while no item fired is none's doing: ``crash_limit`` of those stop the
processor, as skipping the tick for every key would make its readers differ.

A receiver's catch-up runs the function too (in restore mode, on the keys it gains), so it
keeps its own guard (``crash/attempt/<catch-up>``): a record that killed the old owner kills
the receiver as well, and without the guard the receiver would restart into it forever and
the scale never finish. There it is skipped without a dead letter (the old owner wrote one).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from framework.clock import Clock
from framework.processing import DeadLetter, InputMessage
from framework.time.due_items import DueItem, describe_item
from rebalance.positions import Position
from statestore import META_STORE, ProcessorDatabase, StateBatch
from statestore.layout import CRASH_ATTEMPT_KEY, CRASH_SKIPPED_PREFIX

__all__ = [
    "CrashGuard",
    "SkippedRecord",
    "Suspect",
    "TickDeaths",
    "skipped_records",
]

log = logging.getLogger(__name__)


@dataclass
class TickDeaths:
    """The deaths of a processor while a lone tick's items were watched: per key and due
    item running then (``framework.time.due_items``), and while none was (``outside``)."""

    items: dict[tuple[bytes, DueItem], int] = field(default_factory=dict)
    outside: int = 0

    @classmethod
    def read(cls, raw: Mapping[str, Any]) -> TickDeaths:
        """As an attempt record holds them, with the death that left it (if watched)."""
        deaths = cls({_item(key, item): int(n) for key, item, n in raw.get("items", [])})
        deaths.outside = int(raw.get("outside", 0))
        if raw.get("watching"):
            running = raw.get("running")
            if running is None:
                deaths.outside += 1
            else:
                died = _item(*running)
                deaths.items[died] = deaths.items.get(died, 0) + 1
        return deaths

    def describe(self) -> str:
        """For the log: the deaths per key and item, and outside any item."""
        items = "".join(
            f"{n} in key {key!r}'s {describe_item(item)}, "
            for (key, item), n in sorted(self.items.items())
        )
        return f"deaths {items}{self.outside} while no item fired"

    def json(self) -> dict[str, Any]:
        """As an attempt record holds them (not watched yet)."""
        items = [[key.hex(), list(item), n] for (key, item), n in sorted(self.items.items())]
        return {"items": items, "outside": self.outside, "watching": False, "running": None}


def _item(key: str, item: list[Any]) -> tuple[bytes, DueItem]:
    """A key (hex) and due item as JSON holds them."""
    domain, due, rank, store, name = item
    return bytes.fromhex(key), (int(domain), int(due), int(rank), str(store), str(name))


@dataclass
class Suspect:
    """Records ``first..last`` of a partition were in flight at ``crashes`` crashes each;
    ``tick``: the one at ``first`` is a tick that ran alone (its deaths, item by item)."""

    first: int
    last: int
    crashes: int
    tick: TickDeaths | None = None


@dataclass(frozen=True)
class SkippedRecord:
    """An input record skipped because it crashed the processor ``crashes`` times."""

    topic: str
    partition: int
    offset: int
    crashes: int
    at: float
    #: a tick's: the keys whose timer or window result it dropped (none: a record skipped)
    keys: tuple[bytes, ...] = ()


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
        #: the attempt written last (``watch`` rewrites it)
        self._entries: list[list[Any]] = []
        raw = self._backend.get(META_STORE, attempt_key)
        if raw is None:
            return
        if offsets is None:
            offsets = database.offsets()
        ranges = orjson.loads(raw)["ranges"]
        for topic, partition, first, last, crashes, *tick in ranges:
            committed = offsets.get((topic, partition))
            start = first if committed is None else max(first, committed)
            if start <= last:
                deaths = TickDeaths.read(tick[0]) if tick and start == first else None
                # only a lone record's counts, the batch's only one (a lone tick's: against
                # its item, if watched): a record alone in its partition's range next to
                # others' is not named by the death
                alone = first == last and len(ranges) == 1
                counted = crashes + 1 if alone and not tick else crashes
                self.suspects[(topic, partition)] = Suspect(start, last, counted, deaths)
                log.warning(
                    "processor %d: the previous run died while processing %s[%d] offsets "
                    "%d..%d (crash %d of records there%s); processing them one at a time",
                    processor,
                    topic,
                    partition,
                    start,
                    last,
                    counted,
                    "" if deaths is None else f"; a tick: {deaths.describe()}",
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

    def tick_deaths(self, topic: str, partition: int, offset: int) -> TickDeaths:
        """The deaths the tick at ``offset`` caused while it ran alone, item by item."""
        suspect = self.suspects.get((topic, partition))
        if suspect is None or suspect.first != offset or suspect.tick is None:
            return TickDeaths()
        return suspect.tick

    def attempt(
        self, ranges: dict[Position, list[int]], ticks: Collection[tuple[str, int, int]] = ()
    ) -> None:
        """Record that the function runs on ``ranges`` (position -> [first, last]) now;
        ``ticks``: where ticks are among them (a range of one tick alone may be watched)."""
        entries: list[list[Any]] = []
        for (topic, partition), (first, last) in ranges.items():
            entry: list[Any] = [
                topic,
                partition,
                first,
                last,
                self.crashes(topic, partition, first),
            ]
            if first == last and (topic, partition, first) in ticks:
                entry.append(self.tick_deaths(topic, partition, first).json())
            entries.append(entry)
        self._entries = entries
        self._write()

    def watch(
        self,
        position: Position,
        running: tuple[bytes, DueItem] | None,
        *,
        watching: bool = True,
    ) -> None:
        """From now on a death names the key and due item ``running`` (``None``: none) of the
        lone tick of ``position`` in the attempt, or, not ``watching``, nothing of it (nothing
        when the attempt has no such tick)."""
        named = None if running is None else [running[0].hex(), list(running[1])]
        for entry in self._entries:
            if (entry[0], entry[1]) == position and len(entry) > 5:
                entry[5] = {**entry[5], "watching": watching, "running": named}
                self._write()
                return

    def _write(self) -> None:
        entries = {"ranges": self._entries}
        self._backend.write({META_STORE: [(self._attempt_key, orjson.dumps(entries))]})

    def survived(self) -> None:
        """The function ran on every record of the attempt (or stopped by policy)."""
        self._entries = []
        self._backend.write({META_STORE: [(self._attempt_key, None)]})

    def committed(self, next_offsets: dict[Position, int]) -> None:
        """A batch committed: forget suspects it moved past."""
        for position, next_offset in next_offsets.items():
            suspect = self.suspects.get(position)
            if suspect is not None:
                if next_offset != suspect.first:
                    suspect.first, suspect.tick = next_offset, None
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

    def skip_items(
        self,
        batch: StateBatch,
        where: tuple[str, int, int],
        killers: Mapping[tuple[bytes, DueItem], int],
    ) -> None:
        """Record with ``batch`` that the tick at ``where`` drops the items of ``killers``
        (key and due item -> the crashes it caused), as failed; the dead letters are theirs
        (stage ``timer`` or ``window``)."""
        topic, partition, offset = where
        keys: dict[str, int] = {}
        for (key, _item), crashes in killers.items():
            keys[key.hex()] = max(crashes, keys.get(key.hex(), 0))
        detail = {
            "crashes": max(killers.values()),
            "at": round(self._clock.time(), 3),
            "keys": dict(sorted(keys.items())),
        }
        batch.record_skip(topic, partition, offset, orjson.dumps(detail))
        for (key, item), crashes in sorted(killers.items()):
            log.error(
                "processor %d: the tick at %s[%d]@%d killed the processor %d times while key "
                "%r's due %s ran; it is dropped as failed, not run",
                self._processor,
                topic,
                partition,
                offset,
                crashes,
                key,
                describe_item(item),
            )


def skipped_records(database: ProcessorDatabase) -> list[SkippedRecord]:
    """The records skipped after crashes, as recorded in ``database``, oldest offset first."""
    end = CRASH_SKIPPED_PREFIX[:-1] + bytes([CRASH_SKIPPED_PREFIX[-1] + 1])
    found = []
    for key, value in database.backend.scan(META_STORE, CRASH_SKIPPED_PREFIX, end):
        where = key[len(CRASH_SKIPPED_PREFIX) :].decode()
        topic_partition, _, offset = where.rpartition("/")
        topic, _, partition = topic_partition.rpartition("/")
        detail = orjson.loads(value)
        keys = tuple(bytes.fromhex(key) for key in detail.get("keys", {}))
        crashes, at = int(detail["crashes"]), float(detail["at"])
        found.append(SkippedRecord(topic, int(partition), int(offset), crashes, at, keys))
    return found
