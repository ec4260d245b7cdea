"""Records that kill a Spark fold's Python worker: found, counted and skipped as the crash guard
does (``framework.runtime.crashes``).

A record that kills the process running the function (it exits, segfaults, runs out of memory)
kills Spark's Python worker on every try, so without help the job fails (or Spark retries
the task until it fails). The processors skip such a record once it killed them alone
``crash_limit`` times (``on_error: stop``: they stop); the state a fold builds must be what
they build, so the fold does the same:

- each fold group leaves a marker in a directory the workers and the driver share (the job's
  staging directory) while it folds: ``group-<label>.json`` says ``folding``, and is removed
  once the group is folded. A marker left ``folding`` after the job failed names a group
  whose worker died in it (a death amid the group's records names none of them);
- the driver then runs the job again (``suspects``); a group that finds its marker folds
  *carefully*: in a child process of the worker, forked per try, which notes in shared memory
  the record the function is running. When the child dies, the parent knows the record: a
  record that killed it ``crash_limit`` times is skipped (the next child folds the group
  without it), or, with ``on_error: stop``, the group fails naming it;
- the marker of a careful group stays (``careful``, with the records it skipped), so the
  group folds carefully in every later run of the job and the driver lists the skips.

A tick applied to a key (``time_fold``) is watched item by item (``Watch.tick``): a death
while one of its timers or window results runs counts against that tick, key and item, and
one that killed the process ``crash_limit`` times is dropped as failed, its function not run
(``Watch.refused``), as the processors drop it (``framework.runtime.tick_guard``); the rest
of the tick still applies to the key.

Deaths outside the function (between records, or in a tick while none of its items ran) are
not the records' doing: after ``crash_limit`` of them the group fails, saying so.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from framework.bootstrap.careful_child import NO_ROW, Position, TickItem, Watch, fold_in_child
from framework.bootstrap.errors import BootstrapError
from framework.errors import describe_error
from framework.time.due_items import DueItem, describe_item

if TYPE_CHECKING:  # pyarrow when a build runs: a processor imports this module (``SkippedInFold``)
    import pyarrow as pa

__all__ = ["CrashWatch", "FoldRows", "GroupRows", "SkippedInFold", "TickItem", "Watch"]

#: folds a group's records but ``skip`` (row indices), telling ``watch`` what it runs
FoldRows = Callable[[frozenset[int], Watch | None], "pa.Table"]


class GroupRows(Protocol):
    """A fold group's records, by row."""

    def where(self, row: int) -> tuple[str, int, int, bytes | None]:
        """The row's topic, partition, offset and key."""
        ...

    def find(self, positions: Collection[Position]) -> dict[Position, int]:
        """The rows of the records at ``positions`` (topic, partition, offset) it holds."""
        ...


log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SkippedInFold:
    """A record a fold skipped because it killed the fold's process ``crashes`` times; or,
    with ``key``, a tick's ``item`` of that key it dropped for that."""

    topic: str
    partition: int
    offset: int
    crashes: int
    key: bytes | None = None
    item: DueItem | None = None

    def describe(self) -> str:
        """What was skipped and why, for people."""
        where = f"{self.topic}[{self.partition}]@{self.offset}"
        if self.key is None or self.item is None:
            return (
                f"skipped {where}: it killed the Spark fold's process {self.crashes} times "
                "(crash_limit; the processors skip it too)"
            )
        return (
            f"dropped key {self.key!r}'s {describe_item(self.item)} at the tick {where}: it "
            f"killed the Spark fold's process {self.crashes} times (crash_limit; the "
            "processors drop it too)"
        )

    def json(self) -> list[Any]:
        """As a marker or a manifest holds it."""
        fields: list[Any] = [self.topic, self.partition, self.offset, self.crashes]
        if self.key is not None and self.item is not None:
            fields += [self.key.hex(), list(self.item)]
        return fields

    @classmethod
    def read(cls, fields: list[Any]) -> SkippedInFold:
        """From what ``json`` gives."""
        topic, partition, offset, crashes, *tick = fields
        where = (str(topic), int(partition), int(offset), int(crashes))
        if not tick:
            return cls(*where)
        key, (domain, due, rank, store, name) = tick
        item = (int(domain), int(due), int(rank), str(store), str(name))
        return cls(*where, bytes.fromhex(key), item)

    @property
    def tick_item(self) -> TickItem | None:
        """The tick's item it is (``None``: a record)."""
        if self.key is None or self.item is None:
            return None
        return (self.topic, self.partition, self.offset), self.key, self.item


class CrashWatch:
    """The fold's crash guard: markers under ``directory``, ``limit`` crashes of one record
    before it is skipped, or the group fails (``stop``, from ``on_error: stop``)."""

    def __init__(self, directory: Path, limit: int, stop: bool) -> None:
        self.directory = str(directory)
        self.limit = limit
        self.stop = stop

    def _marker(self, label: int) -> Path:
        return Path(self.directory) / f"group-{label}.json"

    def _write(self, label: int, state: dict[str, Any]) -> None:
        path = self._marker(label)
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        temporary.write_text(json.dumps(state))
        temporary.replace(path)

    # -- in a Spark Python worker ------------------------------------------------------

    def fold(self, label: int, fold_rows: FoldRows, rows: GroupRows) -> tuple[pa.Table, int]:
        """Fold group ``label`` (``rows``) with ``fold_rows``: in this process, or carefully
        when an earlier try of the group died. Returns the items and how many records were
        skipped."""
        Path(self.directory).mkdir(parents=True, exist_ok=True)
        careful = self._marker(label).exists()
        if not careful:
            self._write(label, {"state": "folding"})
        try:
            if careful:
                table, skipped = self._careful(label, fold_rows, rows)
            else:
                table, skipped = fold_rows(frozenset(), None), 0
        except _WatchStoppedError:
            raise  # its marker says why
        except Exception as error:  # not a death: the job fails with it, and is not run again
            self._write(label, {"state": "failed", "error": describe_error(error)})
            raise
        if not careful:
            self._marker(label).unlink()
        return table, skipped

    def _careful(self, label: int, fold_rows: FoldRows, rows: GroupRows) -> tuple[pa.Table, int]:
        # records (and ticks' items) an earlier careful run of the group skipped are skipped
        # at once (the processors' guards, too, remember a skip): none kills the process again
        before = [SkippedInFold.read(s) for s in _read(self._marker(label)).get("skipped", [])]
        earlier = {(s.topic, s.partition, s.offset): s.crashes for s in before if not s.key}
        found = rows.find(earlier)
        crashes = {row: max(self.limit, earlier[position]) for position, row in found.items()}
        skipped = [SkippedInFold(*position, crashes[row]) for position, row in found.items()]
        ticks = {s.tick_item: max(self.limit, s.crashes) for s in before if s.tick_item}
        skipped += [s for s in before if s.tick_item]
        from pyarrow import Table  # noqa: PLC0415 - see the import above

        outside = 0
        self._write(label, _careful_state(skipped, done=False))
        while True:
            skip = frozenset(row for row, count in crashes.items() if count >= self.limit)
            refused = {item: count for item, count in ticks.items() if count >= self.limit}
            died = fold_in_child(functools.partial(fold_rows, skip), refused)
            if isinstance(died, Table):
                self._write(label, _careful_state(skipped, done=True))
                return died, len(skip)
            row, ending, tick = died
            if tick is not None:
                ticks[tick] = ticks.get(tick, 0) + 1
                if ticks[tick] >= self.limit:
                    skipped.append(self._drop(label, tick, ticks[tick], ending))
                    self._write(label, _careful_state(skipped, done=False))
                continue
            if row == NO_ROW:
                outside += 1
                if outside >= self.limit:
                    self._stop(
                        label,
                        f"the Spark fold's process died {outside} times ({ending}) between "
                        "records, not while the processor function ran on one, so no record "
                        "can be skipped for it. Nothing was ingested. Fix: give Spark's Python "
                        "workers more memory (spark.settings: spark.executor.pyspark.memory), "
                        "or see the Spark executor's log.",
                    )
                continue
            crashes[row] = crashes.get(row, 0) + 1
            if crashes[row] < self.limit:
                continue
            topic, partition, offset, key = rows.where(row)
            if self.stop:
                self._stop(
                    label,
                    f"{topic}[{partition}]@{offset} (key {key!r}) killed the Spark fold's "
                    f"process {crashes[row]} times ({ending}: it exited, crashed, ran out of "
                    "memory or was killed while the function ran on it); with on_error: stop "
                    "it is not skipped, as the processors do not skip it. Nothing was "
                    "ingested. Fix the function or the record, then build again; or set "
                    "on_error: dead-letter to skip such records (the processors then "
                    "dead-letter them, stage crash).",
                )
            skipped.append(SkippedInFold(topic, partition, offset, crashes[row]))
            self._write(label, _careful_state(skipped, done=False))

    def _drop(self, label: int, tick: TickItem, crashes: int, ending: str) -> SkippedInFold:
        """A tick's item that killed the process ``crashes`` times: dropped from now on (or,
        with ``stop``, the group stops naming it)."""
        (topic, partition, offset), key, item = tick
        if self.stop:
            self._stop(
                label,
                f"the tick at {topic}[{partition}]@{offset} killed the Spark fold's process "
                f"{crashes} times ({ending}) while key {key!r}'s {describe_item(item)} ran; "
                "with on_error: stop it is not dropped, as the processors do not drop it. "
                "Nothing was ingested. Fix the timer function or the window's result, then "
                "build again; or set on_error: dead-letter to drop such items (the processors "
                "then dead-letter them).",
            )
        return SkippedInFold(topic, partition, offset, crashes, key, item)

    def _stop(self, label: int, message: str) -> NoReturn:
        self._write(label, {"state": "stopped", "error": message})
        raise _WatchStoppedError(message)

    # -- in the driver -----------------------------------------------------------------

    def _markers(self) -> Iterator[tuple[int, dict[str, Any]]]:
        for path in sorted(Path(self.directory).glob("group-*.json")):
            marker = _read(path)
            if marker:
                yield int(path.stem.removeprefix("group-")), marker

    def again(self, failure: Exception) -> bool:
        """After the job failed with ``failure``: whether to run it again (workers died in
        groups folded normally, which then fold carefully); raises ``BootstrapError`` with
        the reason when a careful group stopped on a record."""
        stopped = self.stopped()
        if stopped is not None:
            raise BootstrapError(stopped) from failure
        suspects = self.suspects()
        if suspects:
            log.warning(
                "the Spark fold's Python worker died while folding %d group(s) (%s); running "
                "the job again, folding them in a child process per try to find the record "
                "that kills it (skipped after crash_limit deaths, as the processors skip it)",
                len(suspects),
                ", ".join(map(str, suspects)),
            )
        return bool(suspects)

    def suspects(self) -> list[int]:
        """After the job failed: the groups whose worker died while folding them normally
        (a run of the job again folds them carefully); none when the failure was anything
        else (a group raised, or stopped on a record)."""
        markers = dict(self._markers())
        if any(m.get("state") in ("stopped", "failed") for m in markers.values()):
            return []
        return sorted(label for label, m in markers.items() if m.get("state") == "folding")

    def stopped(self) -> str | None:
        """After the job failed: why a careful group stopped, when one did."""
        for _label, marker in self._markers():
            if marker.get("state") == "stopped":
                return str(marker.get("error"))
        return None

    def skipped(self) -> list[SkippedInFold]:
        """The records (and ticks' items) careful groups skipped, by position (each
        logged)."""
        found = {}
        for _label, marker in self._markers():
            for fields in marker.get("skipped", []):
                skip = SkippedInFold.read(fields)
                found[(skip.topic, skip.partition, skip.offset, skip.key or b"", skip.item)] = skip
        records = [found[position] for position in sorted(found, key=repr)]
        for record in records:
            log.warning(
                "%s; its state change is not in the build, as the processors' crash guards "
                "leave it out",
                record.describe(),
            )
        return records


class _WatchStoppedError(BootstrapError):
    """A careful group stopped on a record (``on_error: stop``) or on deaths outside the
    function; its marker holds the message."""


def _read(path: Path) -> dict[str, Any]:
    """A marker's content (empty when there is none, or it cannot be read)."""
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _careful_state(skipped: list[SkippedInFold], *, done: bool) -> dict[str, Any]:
    return {"state": "careful", "skipped": [s.json() for s in skipped], "done": done}
