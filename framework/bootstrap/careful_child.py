"""A careful fold group's child process, and what it shares with its parent.

``CrashWatch`` (``crash_watch``) folds a group whose worker died in a child process of the
worker, forked per try: the child notes in memory it shares with the parent what it runs (a
record's row, or a tick's due item of a key: ``Watch``), so that when it dies the parent
knows what killed it.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import signal
import struct
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from framework.bootstrap.errors import BootstrapError
from framework.errors import describe_error
from framework.time.due_items import DueItem

if TYPE_CHECKING:  # pyarrow only when a build runs (a processor imports this module)
    import pyarrow as pa

__all__ = ["NO_ROW", "Position", "TickItem", "Watch", "fold_in_child"]

Position = tuple[str, int, int]
#: a tick's due item of a key: the tick's position, the key, the item
TickItem = tuple[Position, bytes, DueItem]

#: no record runs
NO_ROW = -1
#: the shared row when a tick's item runs (its JSON follows, ``_TICK_HEADER``)
_TICK = -2
_RESULT, _ERROR = b"T", b"E"
_HEADER = struct.Struct("<cQ")  # kind, payload length
_ROW = struct.Struct("<q")
_TICK_HEADER = struct.Struct("<qI")  # _TICK, JSON length
#: what the child and its parent share: the row, or a tick's item (longer ones: none)
_SHARED_BYTES = 1 << 20


class Watch(Protocol):
    """What a careful fold tells its crash watch it runs, and the tick items it drops."""

    def __call__(self, row: int) -> None:
        """The function runs on record ``row`` now (-1: on none)."""
        ...

    def tick(self, where: Position, key: bytes, item: DueItem) -> None:
        """The tick at ``where`` fires ``item`` of ``key`` now (until told a row again)."""
        ...

    def refused(self, where: Position, key: bytes) -> Mapping[DueItem, int]:
        """The items of ``key`` the tick at ``where`` drops, and the deaths each caused."""
        ...


class _SharedWatch:
    """A careful child's ``Watch``: what it runs, in memory its parent shares."""

    def __init__(self, shared: mmap.mmap, refused: Mapping[TickItem, int]) -> None:
        self._shared = shared
        self._refused: dict[tuple[Position, bytes], dict[DueItem, int]] = {}
        for (where, key, item), crashes in refused.items():
            self._refused.setdefault((where, key), {})[item] = crashes

    def __call__(self, row: int) -> None:
        _ROW.pack_into(self._shared, 0, row)

    def tick(self, where: Position, key: bytes, item: DueItem) -> None:
        payload = json.dumps([list(where), key.hex(), list(item)]).encode()
        if _TICK_HEADER.size + len(payload) > _SHARED_BYTES:
            self(NO_ROW)  # (too long to share: a death here names nothing)
            return
        self(NO_ROW)  # (never a half-written item)
        self._shared[_TICK_HEADER.size : _TICK_HEADER.size + len(payload)] = payload
        _TICK_HEADER.pack_into(self._shared, 0, _TICK, len(payload))

    def refused(self, where: Position, key: bytes) -> Mapping[DueItem, int]:
        return self._refused.get((where, key), {})


def _shared_tick(shared: mmap.mmap) -> TickItem:
    """The tick's item a child ran when it died (``_SharedWatch.tick``)."""
    _tick, length = _TICK_HEADER.unpack_from(shared, 0)
    (topic, partition, offset), key, (domain, due, rank, store, name) = json.loads(
        shared[_TICK_HEADER.size : _TICK_HEADER.size + length]
    )
    item = (int(domain), int(due), int(rank), str(store), str(name))
    return (str(topic), int(partition), int(offset)), bytes.fromhex(key), item


def fold_in_child(
    fold: Callable[[Watch], pa.Table], refused: Mapping[TickItem, int]
) -> pa.Table | tuple[int, str, TickItem | None]:
    """Run ``fold`` in a forked child (the ticks' items of ``refused`` dropped): its table,
    or, when the child died, the row it ran the function on (-1: none), how it ended, and
    the tick's item it ran (``None``: none). An exception in the child is raised here (as a
    ``BootstrapError`` with its text)."""
    import pyarrow as pa  # noqa: PLC0415 - see the import above (loaded before the fork)

    shared = mmap.mmap(-1, _SHARED_BYTES)  # anonymous and shared with the child: what it runs
    _ROW.pack_into(shared, 0, NO_ROW)
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: fold, send the table (or the error) and exit, nothing else
        code = 1  # SystemExit and the like end the child as a death (as they end a processor)
        try:
            os.close(reader)
            _send(writer, _RESULT, _table_bytes(fold(_SharedWatch(shared, refused))))
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
    row = _ROW.unpack_from(shared, 0)[0]
    tick = _shared_tick(shared) if row == _TICK else None
    shared.close()
    if len(data) >= _HEADER.size:
        kind, length = _HEADER.unpack_from(data)
        payload = data[_HEADER.size :]
        if len(payload) == length and kind == _ERROR:
            raise BootstrapError(payload.decode("utf-8", "replace"))
        if len(payload) == length and kind == _RESULT and os.waitstatus_to_exitcode(status) == 0:
            return pa.ipc.open_stream(payload).read_all()
    return (NO_ROW if tick is not None else row), _ending(status), tick


def _send(fd: int, kind: bytes, payload: bytes) -> None:
    with os.fdopen(fd, "wb") as pipe:
        pipe.write(_HEADER.pack(kind, len(payload)))
        pipe.write(payload)


def _table_bytes(table: pa.Table) -> bytes:
    import pyarrow as pa  # noqa: PLC0415 - see the import above

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
