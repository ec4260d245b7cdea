"""A batch: the state changes of one processed batch of records, plus the offsets it covers.

Reads see the batch's own uncommitted writes. ``commit`` writes every change and the input
offsets as one atomic backend write (one RocksDB WriteBatch), so after a crash the database is
exactly at some batch boundary and the offsets inside it say where to resume.

The batch holds each write as the database would: encoded bytes (or, for a JSON store, an
immutable str/int/float/bool/None as it decodes), never an object the function still has. Every
read returns a new value, exactly as a read after the commit would; mutating a value read (or
one passed to ``set``) changes nothing until it is ``set``; a failed record rolls back to
exactly what the batch held before it; so the state after a sequence of records does not
depend on how they are cut into batches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from enum import StrEnum
from typing import Any, Generic, TypeVar

import orjson

from statestore.backend import Backend
from statestore.codec import Codec, JsonCodec, RawCodec
from statestore.due_index import DUE_STORE, decode_due
from statestore.errors import BatchStateError
from statestore.key_layout import KeyLayout
from statestore.key_state import KeyState
from statestore.layout import META_STORE, flag_key, offset_key, skipped_key
from statestore.value_cache import CachedBackend

__all__ = ["BatchStatus", "KeyState", "StateBatch", "StoreBatch"]

V = TypeVar("V")
_DELETED: Any = object()
_MISSING: Any = object()
_AS_IS = frozenset({str, int, float, bool, type(None)})
_RAW = frozenset({bytes})
_dumps, _loads = orjson.dumps, orjson.loads  # what JsonCodec does


class BatchStatus(StrEnum):
    """Where a batch is in its life; only an OPEN batch accepts reads and writes."""

    OPEN = "OPEN"
    #: its writes are final and visible to later batches; written at ``commit``
    SEALED = "SEALED"
    COMMITTED = "COMMITTED"
    ABORTED = "ABORTED"


_OPEN = BatchStatus.OPEN  # a module constant: reading an enum member is slower


class StoreBatch(Generic[V]):
    """One named store as seen through a batch: get/set/delete by key."""

    __slots__ = (
        "_as_is",
        "_batch",
        "_check",
        "_decode",
        "_encode",
        "_known",
        "_pending",
        "_read",
        "_stored_key",
        "name",
    )

    def __init__(
        self, batch: StateBatch, backend: Backend, name: str, codec: Codec[V], layout: KeyLayout
    ) -> None:
        self.name = name
        self._batch = batch
        self._read = backend.reader(name)
        self._stored_key = layout.stored
        self._known = layout.memo  # stored keys the layout computed already
        plain, raw = type(codec) is JsonCodec, isinstance(codec, RawCodec)
        self._decode = _loads if plain else bytes if raw else codec.decode
        self._encode = _dumps if plain else codec.encode
        self._check = None if plain else codec.check
        # values held as they are: a JSON store's immutable ones (equal to their JSON), raw bytes
        self._as_is = _AS_IS if plain else _RAW if raw else frozenset()
        # key -> encoded bytes, a value of ``_as_is`` type, or ``_DELETED``
        self._pending: dict[bytes, Any] = {}

    def get(self, key: bytes, default: Any = None) -> Any:
        """A new copy of the value of ``key`` (this batch's write if any), or ``default``."""
        if self._batch.status is not _OPEN:
            self._batch.check_open()
        held = self._pending.get(key, _MISSING)
        if held is _MISSING:
            raw = self._read(self._known.get(key) or self._stored_key(key))
            return default if raw is None else self._decode(raw)
        if type(held) is bytes:
            return self._decode(held)
        return default if held is _DELETED else held

    def set(self, key: bytes, value: V) -> None:
        """Set ``key`` to ``value`` as it is now (stored when the batch commits).

        Raises ``ValidationError`` (typed stores) or ``TypeError`` when ``value`` cannot be
        stored; the batch is then unchanged.
        """
        if self._batch.status is not _OPEN:
            self._batch.check_open()
        kind = type(value)
        try:
            if kind is bytes and self._as_is is _RAW:
                self._pending[key] = value
            elif kind in self._as_is:
                raw = _dumps(value)  # validates it: e.g. an int beyond 64 bits fails here
                self._pending[key] = _loads(raw) if kind is float else value  # nan -> None
            elif self._check is None:
                # orjson returns its oversized work buffer; holding thousands of those until
                # the commit is slow (~3 us each), an exact-size copy is not (~0.1 us)
                self._pending[key] = bytes(memoryview(_dumps(value)))
            else:
                raw = self._encode(self._check(value))
                self._readable(raw, value)
                self._pending[key] = raw
        except TypeError as error:
            raise TypeError(
                f"store {self.name!r} cannot hold this {kind.__name__} value: {error}. Fix: "
                "store JSON-able values (dict with str keys, list, str, int, float, bool, "
                "None), or declare the store with a value_type (e.g. a pydantic model)."
            ) from error

    def _readable(self, raw: bytes, value: Any) -> None:
        """Refuse a typed value that would not read back (e.g. a float field holding inf,
        stored as null, or a field mutated to the wrong type): storing it would make every
        later record of the key fail."""
        try:
            self._decode(raw)
        except ValueError as error:  # pydantic's ValidationError is a ValueError
            raise ValueError(
                f"store {self.name!r} cannot hold this {type(value).__name__} value: stored "
                f"as {raw[:200]!r} it does not read back ({error}). Fix: keep the value "
                "valid for the store's type (no inf/NaN floats, fields of their declared "
                "types)."
            ) from None

    def delete(self, key: bytes) -> None:
        """Delete ``key`` (when the batch commits)."""
        self._batch.check_open()
        self._pending[key] = _DELETED

    def savepoint(self, key: bytes) -> Any:
        """What this batch holds for ``key`` now, to ``rollback`` to if a record fails."""
        return self._pending.get(key, _MISSING)

    def rollback(self, key: bytes, saved: Any) -> None:
        """Undo this batch's writes to ``key`` since ``savepoint`` returned ``saved``."""
        if saved is _MISSING:
            self._pending.pop(key, None)
        else:
            self._pending[key] = saved

    def key(self, key: bytes) -> KeyState[V]:
        """A view of this store limited to one key: what a processor function gets."""
        return KeyState(self, key)

    def has_changes(self) -> bool:
        """Whether this store has writes pending."""
        return bool(self._pending)

    def pending_items(self) -> dict[bytes, bytes | None]:
        """This batch's writes by user key, encoded (``None``: deleted)."""
        encode = self._encode
        return {
            key: None if held is _DELETED else held if type(held) is bytes else encode(held)
            for key, held in self._pending.items()
        }

    def encoded_changes(self) -> Iterator[tuple[bytes, bytes | None]]:
        """The pending writes as stored keys and bytes (``None`` for deletes), encoded as they
        are read."""
        encode, known, stored_key = self._encode, self._known, self._stored_key
        for key, held in self._pending.items():
            stored = known.get(key) or stored_key(key)
            if type(held) is bytes:
                yield stored, held
            elif held is _DELETED:
                yield stored, None
            else:
                # an exact-size copy: orjson's own result keeps its ~4 KiB work buffer, and
                # the value cache holds these (100k of them took ~400 MB)
                yield stored, bytes(memoryview(encode(held)))


class StateBatch:
    """Collects one processed batch's writes to every store and its input offsets."""

    def __init__(
        self,
        backend: Backend,
        codecs: Mapping[str, Codec[Any]],
        layout: KeyLayout,
        on_commit: Callable[[dict[tuple[str, int], int]], None] | None = None,
    ) -> None:
        self._backend = backend
        self._codecs = codecs
        self._layout = layout
        self._stores: dict[str, StoreBatch[Any]] = {}
        self._offsets: dict[tuple[str, int], int] = {}
        self._meta: dict[bytes, bytes | None] = {}
        #: ``set_progress``'s ``(scope, topic, partition) -> offset``, encoded once, in ``_changes``
        self._progress: dict[tuple[str, str, int], int] = {}
        self._cleared = False  # (whether ``clear_progress`` wrote to ``_meta``)
        self._on_commit = on_commit
        self._sealed: dict[str, list[tuple[bytes, bytes | None]]] = {}
        self._token = -1
        self.status = BatchStatus.OPEN

    def check_open(self) -> None:
        """Raise ``BatchStateError`` unless the batch is still open."""
        if self.status is not BatchStatus.OPEN:
            raise BatchStateError(
                f"this state batch is {self.status.value}; start a new batch for more writes"
            )

    def store(self, name: str) -> StoreBatch[Any]:
        """The named store as seen through this batch."""
        view = self._stores.get(name)
        if view is None:
            self.check_open()
            try:
                codec = self._codecs[name]
            except KeyError:
                raise BatchStateError(
                    f"no store named {name!r}; declared stores: {sorted(self._codecs)}"
                ) from None
            view = self._stores[name] = StoreBatch(self, self._backend, name, codec, self._layout)
        return view

    def set_offset(self, topic: str, partition: int, next_offset: int) -> None:
        """Record that input up to ``next_offset`` (exclusive) is in this batch's state."""
        self.check_open()
        if next_offset < 0:
            raise ValueError(f"offsets are non-negative, got {next_offset}")
        self._offsets[(topic, partition)] = next_offset

    def set_progress(self, scope: str, topic: str, partition: int, next_offset: int) -> None:
        """Record an offset of another read than the input (e.g. a catch-up), in ``scope``
        (the last one set for a partition and scope is written)."""
        if self.status is not BatchStatus.OPEN:
            self.check_open()
        if self._cleared:
            self._meta.pop(offset_key(topic, partition, scope), None)
        self._progress[(scope, topic, partition)] = next_offset

    def clear_progress(self, scope: str, topic: str, partition: int) -> None:
        """Forget an offset recorded with ``set_progress``."""
        self.check_open()
        self._progress.pop((scope, topic, partition), None)
        self._meta[offset_key(topic, partition, scope)] = None
        self._cleared = True

    def record_skip(self, topic: str, partition: int, offset: int, detail: bytes) -> None:
        """Record (with this batch) that the input record at ``offset`` was skipped after it
        crashed the processor; ``detail`` is JSON saying why."""
        self.check_open()
        self._meta[skipped_key(topic, partition, offset)] = detail

    def set_flag(self, name: str) -> None:
        """Record that a one-time step named ``name`` is done (with this batch)."""
        self.check_open()
        self._meta[flag_key(name)] = b"1"

    def due_keys(self, event_limit: int, wall_limit: int) -> list[bytes]:
        """The user keys with an event-time due ``<= event_limit`` or a processing-time due
        ``<= wall_limit`` (``statestore.due_index``), this batch's writes included; in
        stored order. It may name a key whose due moved later (read it to know)."""
        stored: set[bytes] = set()
        if isinstance(self._backend, CachedBackend):
            stored.update(self._backend.due_index.due(event_limit, wall_limit))
        user, found = self._layout.user, set()
        view = self._stores.get(DUE_STORE)
        pending = view.pending_items() if view is not None else {}
        for key in stored:
            if user(key) not in pending:
                found.add(user(key))
        for key, raw in pending.items():
            if raw is not None:
                event, wall = decode_due(raw)
                if event <= event_limit or wall <= wall_limit:
                    found.add(key)
        stored_key = self._layout.stored
        return sorted(found, key=stored_key)

    @property
    def offsets(self) -> dict[tuple[str, int], int]:
        """The offsets this batch will commit."""
        return dict(self._offsets)

    def _changes(self) -> dict[str, list[tuple[bytes, bytes | None]]]:
        changes: dict[str, list[tuple[bytes, bytes | None]]] = {
            name: list(view.encoded_changes())
            for name, view in self._stores.items()
            if view.has_changes()
        }
        if self._offsets or self._meta or self._progress:
            offsets = [((None, *at), offset) for at, offset in self._offsets.items()]
            changes[META_STORE] = [
                *((offset_key(t, p, s), str(o).encode()) for (s, t, p), o in offsets),
                *self._meta.items(),
                *(
                    (offset_key(t, p, s), str(o).encode())
                    for (s, t, p), o in self._progress.items()
                ),
            ]
        return changes

    def seal(self) -> None:
        """Take no more writes, and let later batches read this one's before it commits
        (``backend`` must be a ``CachedBackend``): staged there until ``commit`` writes it,
        or dropped with every later staged batch (``CachedBackend.discard_staged``)."""
        self.check_open()
        if not isinstance(self._backend, CachedBackend):
            raise BatchStateError("sealing a batch needs a database with a value cache")
        self._sealed = self._changes()
        self._token = self._backend.stage(self._sealed)
        self.status = BatchStatus.SEALED
        self._stores.clear()  # each refers back to this batch: let reference counting free them

    def commit(self) -> None:
        """Write every change and the offsets in one atomic write (a sealed batch: after
        every batch sealed before it)."""
        if self.status is BatchStatus.SEALED:
            assert isinstance(self._backend, CachedBackend)
            self._backend.commit_staged(self._token, self._sealed)
        else:
            self.check_open()
            changes = self._changes()
            if changes:
                self._backend.write(changes)
        self.status = BatchStatus.COMMITTED
        self._stores.clear()  # each refers back to this batch: let reference counting free them
        self._sealed = {}
        if self._on_commit is not None:
            self._on_commit(self._offsets)

    def abort(self) -> None:
        """Drop every change of this batch."""
        self.check_open()
        self._stores.clear()
        self._offsets.clear()
        self._meta.clear()
        self._progress.clear()
        self.status = BatchStatus.ABORTED
