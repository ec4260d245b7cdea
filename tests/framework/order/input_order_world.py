"""An ``InputOrder`` (``framework.runtime.ordering``) on its own, as its tests build it: an
app reading ``clicks`` then ``views`` in the canonical order (one store, a function that does
nothing), the topics' registry entries given, a fake clock."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from framework import App, AppConfig, Record
from framework.config import TopicConfig
from framework.config_time import TimeConfig
from framework.coordination.registry import TopicEntry
from framework.runtime.growth_bases import GrowthBases
from framework.runtime.ordering import InputOrder
from statestore import DatabaseIdentity, ProcessorDatabase
from tests.clocks import ManualClock

__all__ = ["input_order"]


class _Steps:
    def known_steps(self, topic: str, /) -> int:
        return 1


def input_order(
    entries: Mapping[str, TopicEntry],
    database: ProcessorDatabase | None = None,
    bases: GrowthBases | None = None,
) -> tuple[InputOrder, ProcessorDatabase, ManualClock]:
    """The order over ``database`` (a restart: an earlier one's) or a new one in memory,
    with the registry's ``entries``, growth bases recorded in ``bases`` (the app's control
    log; in memory, this order's alone, by default); its database and clock."""
    config = AppConfig(
        app_id="two",
        inputs=[TopicConfig(topic="clicks"), TopicConfig(topic="views")],
        initial_processors=1,
        time=TimeConfig(input_order="canonical", max_input_wait=timedelta(seconds=1)),
    )
    app = App(config)
    app.store("s")

    @app.processor(stores=["s"])
    def f(record: Record[bytes], state: object) -> None:
        """Nothing."""

    if database is None:
        database = ProcessorDatabase.in_memory(DatabaseIdentity("two", 0), app.store_specs())
    clock = ManualClock()
    order = InputOrder(app, database, clock, steps=_Steps(), inputs=lambda: entries, bases=bases)
    return order, database, clock
