"""The event time of an input item, as the merge of several inputs orders it
(``framework.order``): from the record alone, as every reader computes it.

- a keyed record: its event time by its topic's rule (``@app.processor(event_time=...)``
  or ``app.table(event_time=...)``; the Kafka timestamp by default), its value decoded as
  its function's; ``None`` when it has none (undecodable, no such field: it becomes a dead
  letter or is judged late when applied, and raises no mark), and for the tombstone of a
  table whose event time is a field or a function (``TableSpec.time_of``: it deletes as of
  its key's table time, and adds no time to the mark, as a compaction tombstone does not);
- a tick of this app (or naming none): its ``floor``;
- anything else (another app's tick, a growth marker, a compaction tombstone, a keyless
  record): ``None``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from framework.app import App
from framework.config_errors import ConfigError
from framework.growth.compaction import has_compaction_header
from framework.growth.markers import is_marker_record
from framework.records import InputMessage, Record, readable_headers
from framework.routes import decoder
from framework.tables import Tables
from framework.time.specs import event_time_of
from framework.time.ticks import TickRead, is_tick, is_tick_key, read_tick

__all__ = ["GROWTH_BASE_SCOPE", "GROWTH_LIFE_SCOPE", "ORDER_SCOPE", "InputTimes", "ordered"]

#: the progress scope of each input partition's mark at the state's offset (written with the
#: offsets by a processor that orders its inputs: ``framework.runtime.ordering``)
ORDER_SCOPE = "order-mark"
#: the progress scope of a growth child's base kept with the state (per child partition:
#: ``framework.runtime.growth_bases``; a Spark build keeps the bases it computed there too)
GROWTH_BASE_SCOPE = "growth-base"
#: the progress scope of the start of the life whose base ``GROWTH_BASE_SCOPE`` keeps
GROWTH_LIFE_SCOPE = "growth-life"


def ordered(app: App) -> bool:
    """Whether ``app`` applies its inputs in the canonical order (``time.input_order:
    canonical`` and more than one input topic)."""
    config = app.config
    return config.time.input_order == "canonical" and len(config.inputs) > 1


class InputTimes:
    """The event times of ``app``'s input items (see the module)."""

    def __init__(self, app: App) -> None:
        self._app_id = app.config.app_id
        tables = Tables(app.tables)
        self._rules: dict[str, tuple[Callable[[bytes | None], Any], Callable[..., int | None]]] = {}
        for topic in app.config.inputs:
            try:
                handler = app.handler(topic.topic)
            except ConfigError:  # (no function: its records become dead letters)
                continue
            table = app.tables.get(topic.topic)
            if table is not None:  # (a tombstone's time: see TableSpec.time_of)
                self._rules[topic.topic] = (partial(tables.decode, topic.topic), table.time_of)
                continue
            self._rules[topic.topic] = (
                decoder(handler.value_type),
                event_time_of(handler.event_time),
            )

    def of(  # noqa: PLR0911 - one return per kind of item
        self, topic: str, partition: int, offset: int, message: InputMessage
    ) -> int | None:
        """The event time of ``message`` at ``offset`` of ``topic[partition]`` (``None``:
        it has none)."""
        key = message.key()
        headers = readable_headers(message)
        if headers is None:
            return None
        if key is None or is_tick_key(topic, key):
            if not is_tick(headers):
                return None
            read = read_tick(headers)
            if isinstance(read, TickRead) and read.applies_to(self._app_id):
                return read.floor
            return None
        if is_marker_record(topic, key, headers) or has_compaction_header(headers):
            return None
        rule = self._rules.get(topic)
        if rule is None:
            return None
        decode, event_time = rule
        try:
            value = decode(message.value())
            return event_time(Record(topic, partition, offset, key, value, message=message))
        except Exception:  # (no event time: judged when the record is applied)
            return None
