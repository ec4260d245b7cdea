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

Deaths outside the function (between records) are not the records' doing: after
``crash_limit`` of them the group fails, saying so.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import mmap
import os
import signal
import struct
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, Protocol

import pyarrow as pa

from framework.bootstrap.errors import BootstrapError
from framework.errors import describe_error

__all__ = ["CrashWatch", "FoldRows", "GroupRows", "SkippedInFold"]

#: folds a group's records but ``skip`` (row indices), telling ``running`` each row it runs
#: the function on (-1: none)
FoldRows = Callable[[frozenset[int], Callable[[int], None] | None], pa.Table]
Position = tuple[str, int, int]


class GroupRows(Protocol):
    """A fold group's records, by row."""

    def where(self, row: int) -> tuple[str, int, int, bytes | None]:
        """The row's topic, partition, offset and key."""
        ...

    def find(self, positions: Collection[Position]) -> dict[Position, int]:
        """The rows of the records at ``positions`` (topic, partition, offset) it holds."""
        ...


log = logging.getLogger(__name__)

_NONE = -1
_RESULT, _ERROR = b"T", b"E"
_HEADER = struct.Struct("<cQ")  # kind, payload length


@dataclass(frozen=True)
class SkippedInFold:
    """A record a fold skipped because it killed the fold's process ``crashes`` times."""

    topic: str
    partition: int
    offset: int
    crashes: int


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
        # records an earlier careful run of the group skipped are skipped at once (the
        # processors' guards, too, remember a skip): none kills the process again
        earlier = {
            (str(t), int(p), int(o)): int(c)
            for t, p, o, c in _read(self._marker(label)).get("skipped", [])
        }
        found = rows.find(earlier)
        crashes = {row: max(self.limit, earlier[position]) for position, row in found.items()}
        skipped = [SkippedInFold(*position, crashes[row]) for position, row in found.items()]
        outside = 0
        self._write(label, _careful_state(skipped, done=False))
        while True:
            skip = frozenset(row for row, count in crashes.items() if count >= self.limit)
            died = _fold_in_child(functools.partial(fold_rows, skip))
            if isinstance(died, pa.Table):
                self._write(label, _careful_state(skipped, done=True))
                return died, len(skip)
            row, ending = died
            if row == _NONE:
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
        """The records careful groups skipped, by position (each logged)."""
        found = {
            (s[0], int(s[1]), int(s[2])): SkippedInFold(s[0], int(s[1]), int(s[2]), int(s[3]))
            for _label, marker in self._markers()
            for s in marker.get("skipped", [])
        }
        records = [found[position] for position in sorted(found)]
        for record in records:
            log.warning(
                "%s[%d]@%d killed the Spark fold's process %d times; it is skipped, as the "
                "processors' crash guards skip it (its state change is not in the build)",
                record.topic,
                record.partition,
                record.offset,
                record.crashes,
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
    rows = [[s.topic, s.partition, s.offset, s.crashes] for s in skipped]
    return {"state": "careful", "skipped": rows, "done": done}


def _fold_in_child(
    fold: Callable[[Callable[[int], None]], pa.Table],
) -> pa.Table | tuple[int, str]:
    """Run ``fold`` in a forked child: its table, or, when the child died, the row it ran
    the function on (-1: none) and how it ended. An exception in the child is raised here
    (as a ``BootstrapError`` with its text)."""
    shared = mmap.mmap(-1, 8)  # anonymous and shared with the child: the row it runs
    struct.pack_into("<q", shared, 0, _NONE)
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: fold, send the table (or the error) and exit, nothing else
        code = 1  # SystemExit and the like end the child as a death (as they end a processor)
        try:
            os.close(reader)

            def running(row: int) -> None:
                struct.pack_into("<q", shared, 0, row)

            _send(writer, _RESULT, _table_bytes(fold(running)))
            code = 0
        except Exception as error:
            with contextlib.suppress(Exception):
                _send(writer, _ERROR, describe_error(error).encode("utf-8", "replace"))
        finally:
            os._exit(code)
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    row = struct.unpack_from("<q", shared, 0)[0]
    shared.close()
    if len(data) >= _HEADER.size:
        kind, length = _HEADER.unpack_from(data)
        payload = data[_HEADER.size :]
        if len(payload) == length and kind == _ERROR:
            raise BootstrapError(payload.decode("utf-8", "replace"))
        if len(payload) == length and kind == _RESULT and os.waitstatus_to_exitcode(status) == 0:
            return pa.ipc.open_stream(payload).read_all()
    return row, _ending(status)


def _send(fd: int, kind: bytes, payload: bytes) -> None:
    with os.fdopen(fd, "wb") as pipe:
        pipe.write(_HEADER.pack(kind, len(payload)))
        pipe.write(payload)


def _table_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as stream:
        stream.write_table(table)
    return bytes(sink.getvalue())


def _ending(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
        return f"signal {-code}"
    return f"exit code {code}"
