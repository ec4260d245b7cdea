"""What a processor function receives (``Record``) and returns (``Output``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

__all__ = ["Output", "Record"]

V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class Record(Generic[V]):
    """One input record: its key, its decoded value and where it came from."""

    topic: str
    partition: int
    offset: int
    key: bytes
    value: V
    timestamp: int | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()

    @property
    def key_text(self) -> str:
        """The key as UTF-8 text (undecodable bytes replaced)."""
        return self.key.decode("utf-8", errors="replace")

    def header(self, name: str) -> bytes | None:
        """The last value of header ``name``, or ``None``."""
        found = None
        for header_name, value in self.headers:
            if header_name == name:
                found = value
        return found


@dataclass(frozen=True, slots=True)
class Output:
    """A record to write to an output topic.

    ``value`` may be bytes, text, a pydantic model (written as JSON), ``None`` (a tombstone)
    or any JSON-able value. ``topic`` defaults to the app's only output topic; ``key`` to the
    input record's key.
    """

    value: Any
    topic: str | None = None
    key: bytes | None = None
    headers: Mapping[str, bytes] = field(default_factory=dict)
