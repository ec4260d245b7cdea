"""The ``time:`` section of an app's config: how its processors record the progress of time.

``tick_interval`` and ``idle_after`` matter to apps that keep time (a window or timer store,
or a store whose values expire): each processor considers, every ``tick_interval`` of wall
clock, each input partition it owns and reads live, and appends a tick
(``framework.time.ticks``) to it when a key living there has something due by then;
``idle_after`` lets the event time of a partition that received no record for that long move
on with the wall clock. ``input_order`` (with ``max_input_wait``) says in which order an app
with several input topics applies their records (``framework.runtime.ordering``).
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

__all__ = ["TimeConfig"]

_NUMBER = re.compile(r"[0-9]+(\.[0-9]*)?")
_DURATION: TypeAdapter[timedelta] = TypeAdapter(timedelta)
_FORMS = "seconds (e.g. 0.5 or 30) or an ISO 8601 duration (e.g. PT30S, PT5M)"


class TimeConfig(BaseModel):
    """When a processor ticks its input partitions (see the module).

    ``tick_interval``: how often a processor considers ticking each partition it owns (a
    tick is written only when something of a key living there is due, and never while an
    earlier tick it wrote there is unread). ``idle_after``: a partition that received no
    record for this long has its event-time floor at the wall clock minus ``idle_after``
    (``None``, the default: event time moves only with the records' own times).

    ``input_order``: how the live loop of an app with several input topics orders their
    records: ``"arrival"`` (the default) as fetched; ``"canonical"`` in each key's canonical
    order (``framework.order``: event time as read, then the input's place in the config, then
    offset), waiting at most ``max_input_wait`` for a slower input before a recorded tick
    (``framework.runtime.ordering``) lets the faster one go on. With one input topic both are
    the same.
    """

    model_config = ConfigDict(extra="forbid")

    tick_interval: timedelta = Field(
        default=timedelta(seconds=1),
        description="apps with windows, timers or expiring values only: how often a processor "
        "considers recording the progress of time in each input partition it owns and reads "
        "live. It appends a *tick* there (a record with header `splitstate.tick` = "
        '`{"floor": ms, "wall": ms, "app": app_id, "steps": n}`: the largest event time read '
        "from the partition, its wall clock, its app, and how many steps of the topic's "
        "partition history its view of the registry holds) in its batch's transaction, and "
        "only when a key living in the partition has something due by then and no earlier "
        "tick it wrote there is still unread. Every reader (the processor itself, a rebuild, a "
        "catch-up) applies a tick where it lies in the partition. "
        f"Given as {_FORMS}; at least 1 ms",
    )
    idle_after: timedelta | None = Field(
        default=None,
        description="a partition that received no record for this long has its ticks' floor "
        "at the wall clock less `idle_after`, so the windows and event-time timers of keys "
        "there move on while no record comes; unset (off): event time moves only with the "
        f"records' own times. Given as {_FORMS}; at least 1 ms",
    )

    input_order: Literal["arrival", "canonical"] = Field(
        default="arrival",
        description="apps with several input topics only (one topic: no difference): "
        "`arrival` applies records as they are fetched; `canonical` makes the live loop apply "
        "each key's records in one canonical order (see "
        "[Several inputs](concepts/time.md#several-inputs); it does not cover catch-up, "
        "growth or the Spark build of an app that keeps time yet)",
    )
    max_input_wait: timedelta = Field(
        default=timedelta(seconds=1),
        description="`input_order: canonical` only: how long a record waits for a quiet input "
        "that may still precede it before the processor records a *forced tick* in that "
        f"input's partition (Kafka Streams' `max.task.idle.ms`). Given as {_FORMS}; at least 1 ms",
    )

    @field_validator("tick_interval", "idle_after", "max_input_wait", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        if value is None or isinstance(value, timedelta):
            return value
        try:
            if isinstance(value, bool):
                raise ValueError(value)
            if isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
                value = float(value)  # (an environment variable's seconds)
            return _DURATION.validate_python(value)
        except (ValidationError, ValueError):
            raise ValueError(f"{value!r} is not a duration. Fix: give {_FORMS}") from None

    @field_validator("tick_interval")
    @classmethod
    def _positive_interval(cls, value: timedelta) -> timedelta:
        if value < timedelta(milliseconds=1):
            raise ValueError(
                f"tick_interval must be at least 1 ms, got {value.total_seconds()} s. "
                "Fix: e.g. 1 (a second)"
            )
        return value

    @field_validator("max_input_wait")
    @classmethod
    def _positive_wait(cls, value: timedelta) -> timedelta:
        if value < timedelta(milliseconds=1):
            raise ValueError(
                f"max_input_wait must be at least 1 ms, got {value.total_seconds()} s. "
                "Fix: e.g. 1 (a second)"
            )
        return value

    @field_validator("idle_after")
    @classmethod
    def _positive_idle(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and value < timedelta(milliseconds=1):
            raise ValueError(
                f"idle_after must be at least 1 ms, got {value.total_seconds()} s. Fix: "
                "e.g. 60 (a minute), or null to keep event time to the records' own"
            )
        return value

    @property
    def tick_seconds(self) -> float:
        """``tick_interval`` in seconds."""
        return self.tick_interval.total_seconds()

    @property
    def wait_seconds(self) -> float:
        """``max_input_wait`` in seconds."""
        return self.max_input_wait.total_seconds()

    @property
    def idle_ms(self) -> int | None:
        """``idle_after`` in whole milliseconds (``None``: off)."""
        if self.idle_after is None:
            return None
        return self.idle_after // timedelta(milliseconds=1)
