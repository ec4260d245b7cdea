"""A two-input app whose state shows the order it applied each key's records in: per key, it
appends ``"<topic><at>,"`` of every record it applies (``at``: the value's event time, ms).
Inputs ``a`` then ``b`` (``PARTITIONS`` each), ``time.input_order: canonical``."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from framework import App, AppConfig, Record
from framework.config import TopicConfig
from framework.config_time import TimeConfig
from statestore import KeyState

#: the input topics, in config order
INPUTS = ("a", "b")
#: each input's partitions
PARTITIONS = 2
Order = Literal["arrival", "canonical"]


class Event(BaseModel):
    """One input record: its event time (ms)."""

    at: int


def config(order: Order = "canonical") -> AppConfig:
    """The app's config, its inputs applied in ``order``."""
    return AppConfig(
        app_id="appending",
        inputs=[TopicConfig(topic=topic, partitions=PARTITIONS) for topic in INPUTS],
        initial_processors=1,
        time=TimeConfig(input_order=order),
    )


def appending_app(order: Order = "canonical") -> App:
    """The app (a new one each call: ``App.configure`` changes it)."""
    app = App(config(order))
    app.store("applied")

    @app.processor(value_type=Event, event_time="at", stores=["applied"])
    def append(record: Record[Event], state: KeyState[str]) -> None:
        """Append where the record came from and its time."""
        state.set(f"{state.get() or ''}{record.topic}{record.value.at},")

    return app
