"""The app's control log as a deterministic state machine (pure; the log itself is Kafka's).

Every reader applies the same records in log order to ``ControlState.apply`` and so reaches
the same state. A record that does not fit the current state (a second, different app
definition; a stale or skipped generation) is ignored the same way by everyone, and
``apply`` says why.

Records are JSON objects with a ``type``:

- ``app``: the app's fixed parameters: ``app_id``, ``initial_processors`` (B), ``inputs``
  (topic -> initial partition count N), ``key_hash``. Written once, when the app first starts.
- ``generation``: ``generation`` g and ``processors`` P in force from then on. Generation 0
  comes with the app definition; each scale writes g + 1.
- ``metadata_hash``: the last KIP-1101 group hash the processors acted on.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["AppDefinition", "ControlState", "Generation"]


@dataclass(frozen=True)
class AppDefinition:
    """The parameters that never change for an app."""

    app_id: str
    initial_processors: int
    inputs: dict[str, int]
    key_hash: str = "murmur3"

    def to_record(self) -> dict[str, Any]:
        """The ``app`` record."""
        return {
            "type": "app",
            "app_id": self.app_id,
            "initial_processors": self.initial_processors,
            "inputs": dict(sorted(self.inputs.items())),
            "key_hash": self.key_hash,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> AppDefinition:
        """Parse an ``app`` record."""
        return cls(
            app_id=str(record["app_id"]),
            initial_processors=int(record["initial_processors"]),
            inputs={str(k): int(v) for k, v in dict(record["inputs"]).items()},
            key_hash=str(record.get("key_hash", "murmur3")),
        )


@dataclass(frozen=True)
class Generation:
    """A processor count in force from a generation on."""

    generation: int
    processors: int

    def to_record(self) -> dict[str, Any]:
        """The ``generation`` record."""
        return {"type": "generation", "generation": self.generation, "processors": self.processors}


@dataclass(frozen=True)
class ControlState:
    """What the control log says, after applying its records in order."""

    app: AppDefinition | None = None
    generation: Generation | None = None
    metadata_hash: int | None = None
    ignored: tuple[str, ...] = field(default=())

    @property
    def processors(self) -> int | None:
        """The processor count in force, once the app is defined."""
        return self.generation.processors if self.generation else None

    def apply(self, record: dict[str, Any]) -> ControlState:
        """The state after ``record``; a record that does not fit is ignored and noted."""
        kind = record.get("type")
        if kind == "app":
            return self._apply_app(AppDefinition.from_record(record))
        if kind == "generation":
            return self._apply_generation(
                Generation(int(record["generation"]), int(record["processors"]))
            )
        if kind == "metadata_hash":
            return replace(self, metadata_hash=int(record["hash"]))
        return self._ignore(f"unknown record type {kind!r}")

    def _apply_app(self, definition: AppDefinition) -> ControlState:
        if self.app is None:
            return replace(self, app=definition)
        if definition == self.app:
            return self
        return self._ignore(f"a second app definition {definition} differs from {self.app}")

    def _apply_generation(self, generation: Generation) -> ControlState:
        if self.app is None:
            return self._ignore("a generation before the app definition")
        if generation == self.generation:
            return self
        expected = 0 if self.generation is None else self.generation.generation + 1
        if generation.generation != expected:
            return self._ignore(f"generation {generation.generation} where {expected} was expected")
        if generation.processors < self.app.initial_processors:
            return self._ignore(
                f"generation {generation.generation} with {generation.processors} processors, "
                f"below initial_processors {self.app.initial_processors}"
            )
        return replace(self, generation=generation)

    def _ignore(self, reason: str) -> ControlState:
        return replace(self, ignored=(*self.ignored, reason))
