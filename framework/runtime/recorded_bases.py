"""Where a growth child's base is recorded: the app's control log (``ControlBases``: a
``growth_base`` record per life, the first of a life applies) or memory (``MemoryBases``:
one process, tests). ``framework.runtime.growth_bases`` finds, keeps and publishes them."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from framework.kafka import KafkaIOError
from rebalance.control import ControlState

__all__ = ["ControlBases", "GrowthBases", "LifeKey", "MemoryBases", "growth_base_record"]

log = logging.getLogger("framework.runtime.loop")

#: a growth child's life: ``(topic, partition, its life's start offset)``
LifeKey = tuple[str, int, int]


class GrowthBases(Protocol):
    """Where the app records growth children's bases (its control log)."""

    def recorded(self, topic: str, partition: int, start: int, /) -> int | None:
        """The base recorded for the life of ``topic[partition]`` starting at ``start``."""

    def publish(self, topic: str, partition: int, start: int, base: int, /) -> bool:
        """Record ``base`` for that life (idempotent); whether it was written."""


class MemoryBases:
    """Bases recorded in memory (one process: ``InputOrder``'s default, tests)."""

    def __init__(self) -> None:
        #: the bases recorded, by life
        self.bases: dict[LifeKey, int] = {}

    def recorded(self, topic: str, partition: int, start: int, /) -> int | None:
        """The base recorded for that life."""
        return self.bases.get((topic, partition, start))

    def publish(self, topic: str, partition: int, start: int, base: int, /) -> bool:
        """Record ``base`` (the first one of a life stays)."""
        self.bases.setdefault((topic, partition, start), base)
        return True


def growth_base_record(topic: str, partition: int, start: int, base: int) -> dict[str, Any]:
    """The control-log record of a growth child's base (``rebalance.control``)."""
    return {
        "type": "growth_base",
        "topic": topic,
        "partition": partition,
        "start": start,
        "base": base,
    }


class ControlBases:
    """Bases recorded in the app's control log: ``state`` the watcher's state now,
    ``append`` writes a record."""

    def __init__(
        self, state: Callable[[], ControlState], append: Callable[[Mapping[str, Any]], int]
    ) -> None:
        self._state, self._append = state, append

    def recorded(self, topic: str, partition: int, start: int, /) -> int | None:
        """The base the control log records for that life."""
        return self._state().growth_bases.get((topic, partition, start))

    def publish(self, topic: str, partition: int, start: int, base: int, /) -> bool:
        """Append a ``growth_base`` record; ``False`` when Kafka did not take it (again
        later)."""
        try:
            self._append(growth_base_record(topic, partition, start, base))
        except KafkaIOError as error:
            log.warning(
                "%s[%d]: its growth base was not recorded (%s): again", topic, partition, error
            )
            return False
        return True
