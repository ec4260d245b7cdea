"""``KeyTable``: what a processor function gets for a table it lists in its stores: the
record key's value of the table, read as of a time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from framework.tables.spec import TableSpec
from framework.tables.versions import Versions

__all__ = ["KeyTable"]

V = TypeVar("V")
_UNSET: Any = object()


class KeyTable(Generic[V]):
    """The record key's value of one table (``App.table``), read only.

    ``get()`` reads it as of the current record's event time when the table keeps history
    (``history > 0``: the version with the largest time at or before the record's; ``None``
    if there was none then, it was deleted then, or the record is older than the table's
    horizon, ``table time - history``); with ``history=0`` (the default) only the newest
    version is kept and ``get()`` returns it whatever its time, as Kafka Streams' unversioned
    KTable join does. ``latest()`` is the newest version, ``at(ms)`` the version as of any
    time within history. With ``history=0`` this is still deterministic: the canonical order
    of the app's inputs fixes which table records precede the current record, so a read gives
    the same answer wherever that order is exact (live, on replay, from a snapshot, a Spark
    build: docs/concepts/tables.md says where it is not yet)."""

    __slots__ = ("_decode", "_raw", "_record_time", "_spec", "_versions", "key")

    def __init__(
        self,
        spec: TableSpec,
        key: bytes,
        raw: bytes | None,
        decode: Callable[[bytes | None], Any],
        record_time: Callable[[], int | None],
        *,
        versions: Versions | None = None,
    ) -> None:
        """``raw``: the key's stored versions (``versions``: them decoded already, else
        decoded on the first read); ``decode``: the table's value decoder; ``record_time``:
        the current record's event time (asked for on the first ``get``)."""
        self._spec = spec
        self.key = key
        self._raw = raw
        self._versions: Versions | None = versions
        self._decode = decode
        self._record_time = record_time

    @property
    def table(self) -> str:
        """The table's topic."""
        return self._spec.topic

    @property
    def history(self) -> int:
        """How long (ms) versions are kept before the key's table time."""
        return self._spec.history

    @property
    def time(self) -> int | None:
        """The key's table time: the largest event time of its table records (``None``:
        none applied, or all deleted and pruned)."""
        return self._loaded().time

    def get(self, default: Any = None) -> V | Any:
        """The value as of the current record's event time (``history > 0``), or the newest
        (``history=0``); ``default`` when there is none (see the class). In a timer's
        function (no record) it returns the newest with ``history=0`` and raises
        ``ValueError`` naming ``latest()`` and ``at(timer.time)`` with ``history > 0``."""
        if self._spec.history == 0:
            return self.latest(default)
        at = self._record_time()
        if at is None:
            raise ValueError(
                f"table {self._spec.topic!r} keeps history, so get() reads as of the current "
                "record's event time, and a timer's function has no record. Fix: read the "
                "newest version with latest(), or the version as of the timer's time with "
                "at(timer.time)"
            )
        return self.at(at, default)

    def latest(self, default: Any = None) -> V | Any:
        """The newest version's value (the largest time; with ``history=0`` the version last
        applied, the only one kept), or ``default`` when none or deleted."""
        return self._value(self._loaded().latest(), default)

    def at(self, ms: int, default: Any = None) -> V | Any:
        """The value as of event time ``ms``: the version with the largest time at or before
        it; ``default`` when there is none, it is a tombstone, or ``ms`` is older than the
        horizon (``table time - history``), whose versions are no longer all kept."""
        if type(ms) is not int:
            raise TypeError(f"table {self._spec.topic!r}: at() takes int milliseconds, got {ms!r}")
        return self._value(self._loaded().at(ms, self._spec.history), default)

    def _loaded(self) -> Versions:
        if self._versions is None:
            self._versions = Versions.decode(self._raw)
        return self._versions

    def _value(self, raw: bytes | None, default: Any) -> Any:
        return default if raw is None else self._decode(raw)

    def __repr__(self) -> str:
        return f"KeyTable(table={self._spec.topic!r}, key={self.key!r})"
