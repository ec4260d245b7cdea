"""Re-keying an input through an internal topic (``App.group_by``): the first stage of a
repartition.

``app.group_by("orders", key=lambda record: record.value.region, name="by-region")`` makes
every record of input ``orders`` an output to the app's internal topic
``<app_id>-repartition-by-region``, keyed by what ``key`` returns, with the record's value as
it was read (its raw bytes) and its event time in header ``splitstate.event-time``. The
internal topic is an input of the same app (list it under ``inputs``; ``App.check`` says so
when it is missing): the next stage (a processor, a window, a table) reads it, with
``event_time=spec.event_time`` so its records keep the event time they had upstream. Being an
input, it is created by ``splitstate topics create``, registered and placed by linear hashing,
and owned by the app's processors like any input; its records are outputs, written in the
batch's transaction with the source's offsets. See docs/development/design-repartition.md for
what crosses the repartition and what does not yet (recorded progress).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from framework.config_errors import ConfigError
from framework.records import Output, Record
from framework.time.specs import EventTime, event_time_of

if TYPE_CHECKING:
    from framework.app import App

__all__ = [
    "EVENT_TIME_HEADER",
    "GroupBySpec",
    "KeyFunction",
    "check_repartitions",
    "declare_group_by",
    "internal_topic",
    "repartitioned_time",
    "written_topics",
]

#: the header carrying a re-keyed record's event time (decimal ms) to the next stage
EVENT_TIME_HEADER = "splitstate.event-time"
#: what ``group_by``'s ``key`` gives: the new key, as bytes or text (UTF-8)
KeyFunction = Callable[[Record[Any]], bytes | str]


def internal_topic(app_id: str, name: str) -> str:
    """The internal topic of the app's repartition ``name``."""
    return f"{app_id}-repartition-{name}"


def repartitioned_time(record: Record[Any]) -> int:
    """The event time a re-keyed record had upstream (its ``splitstate.event-time`` header);
    ``ValueError`` when it has none (a record not written by ``group_by``)."""
    for name, value in record.headers:
        if name == EVENT_TIME_HEADER and value is not None:
            return int(value)
    raise ValueError(
        f"record {record.topic}/{record.partition}@{record.offset} has no "
        f"{EVENT_TIME_HEADER!r} header: it was not written by app.group_by"
    )


@dataclass(frozen=True)
class GroupBySpec:
    """A re-keying of input ``source`` by ``key`` into the app's internal topic ``topic``."""

    name: str
    source: str
    key: KeyFunction
    #: the app whose internal topic it is (its id is read when ``topic`` is asked for)
    app: App = field(repr=False)
    #: the next stage's ``event_time``: the time the record had in ``source``
    event_time: Callable[[Record[Any]], int] = repartitioned_time

    @property
    def topic(self) -> str:
        """The internal topic, ``<app_id>-repartition-<name>`` (the app's id as configured
        now: an app loaded with ``--config`` has that file's)."""
        return internal_topic(self.app.app_id, self.name)


class GroupByFunction:
    """``group_by``'s processor function for its source: one output to the internal topic,
    keyed by the key function, value unchanged, event time in a header."""

    def __init__(self, spec: GroupBySpec, event_time: EventTime) -> None:
        self.spec = spec
        self.__name__ = f"group_by[{spec.name}]"
        self._event_time = event_time_of(event_time)

    def __call__(self, record: Record[Any], _state: Any) -> Output:
        new_key = self.spec.key(record)
        if isinstance(new_key, str):
            new_key = new_key.encode()
        if not isinstance(new_key, bytes):
            raise TypeError(
                f"group_by {self.spec.name!r}: key gave {type(new_key).__name__}, not bytes "
                "or str. Fix: return the new key as text or bytes"
            )
        time = str(self._event_time(record)).encode()
        return Output(record.raw, self.spec.topic, new_key, {EVENT_TIME_HEADER: time})


def declare_group_by(  # noqa: PLR0917 - App.group_by's arguments
    app: App,
    source: str,
    key: KeyFunction,
    name: str,
    value_type: type[Any] | None,
    event_time: EventTime,
) -> GroupBySpec:
    """``App.group_by``: registers the source's re-keying function and the spec."""
    if name in app.repartitions:
        raise ValueError(f"group_by {name!r}: the name is declared twice")
    spec = GroupBySpec(name, source, key, app)
    function = GroupByFunction(spec, event_time)
    app.processor(source, value_type, stores=[], event_time=event_time)(function)
    app.repartitions[name] = spec
    return spec


def check_repartitions(app: App) -> None:
    """``ConfigError`` when an app with a ``group_by`` is configured so that its internal
    topic cannot be read exactly: the topic is not an input (the config refuses it as both
    an input and an output), outputs are ``at-least-once`` (a crash would write re-keyed
    records twice, and the next stage's state would count them twice), or the inputs are
    merged in the canonical order (not supported across a repartition yet)."""
    if not app.repartitions:
        return
    config = app.config
    inputs = {t.topic for t in config.inputs}
    for spec in app.repartitions.values():
        if spec.topic not in inputs:
            raise ConfigError(
                f"group_by {spec.name!r} writes internal topic {spec.topic!r}, which is not "
                "an input: the next stage reads it. Fix: add it under `inputs` in the config "
                "(partitions: as the app's other inputs), not under `outputs`"
            )
    names = sorted(app.repartitions)
    if config.processing_guarantee != "exactly-once":
        raise ConfigError(
            f"group_by {names} needs processing_guarantee: exactly-once: under at-least-once "
            "a crash writes re-keyed records to the internal topic again, and the next stage "
            "would apply them twice. Fix: processing_guarantee: exactly-once"
        )
    if config.time.input_order == "canonical":
        raise ConfigError(
            f"group_by {names} with time.input_order: canonical is not supported yet: the "
            "source's records would wait for the internal topic's marks, which only they "
            "make. Fix: time.input_order: arrival (see docs/development/design-repartition.md)"
        )


def written_topics(app: App) -> set[str]:
    """The topics the app's functions may write: its outputs and its internal topics."""
    return {t.topic for t in app.config.outputs} | {
        spec.topic for spec in app.repartitions.values()
    }
