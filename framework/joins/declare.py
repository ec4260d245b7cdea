"""Declaring joins on an app (``App.interval_join``, ``App.table_join``) and what an app with
joins must be configured with (``App.check``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from framework.config_errors import ConfigError
from framework.joins.interval import (
    IntervalJoinSpec,
    JoinExpiry,
    JoinFunction,
    JoinSide,
    JoinType,
)
from framework.joins.table_join import TableJoinFunction, TableJoinSpec
from framework.time.durations import Duration, to_ms
from framework.time.specs import EventTime, TimerSpec
from statestore import StoreSpec
from statestore.codec import RawBytes

if TYPE_CHECKING:
    from framework.app import App

__all__ = ["check_joins", "declare_interval_join", "declare_table_join", "refuse_joined_input"]

J = TypeVar("J", bound=JoinFunction)
T = TypeVar("T", bound=TableJoinFunction)
_HOWS = ("inner", "left", "outer")


def declare_interval_join(  # noqa: PLR0917 - App.interval_join's arguments
    app: App,
    left: str,
    right: str,
    before: Duration,
    after: Duration,
    how: JoinType,
    grace: Duration,
    name: str | None,
    types: tuple[type[Any] | None, type[Any] | None],
    times: tuple[EventTime, EventTime],
) -> Callable[[J], J]:
    """``App.interval_join``'s decorator: registers the join's side functions, buffer store
    and expiry timers for the decorated function."""
    _check_how(how)
    window = (
        to_ms(before, "interval join before", positive=False),
        to_ms(after, "interval join after", positive=False),
        to_ms(grace, "interval join grace", positive=False),
    )
    if left == right:
        raise ValueError(
            f"interval join of {left!r} with itself: a join has two inputs. Fix: join two "
            "topics (a self-join needs a copy of the topic)"
        )
    for topic in (left, right):
        if topic in app.tables:
            raise ValueError(
                f"interval join input {topic!r} is a table (app.table): an interval join "
                f"joins two streams. Fix: read the table with stores=[{topic!r}] in the other "
                "input's processor (KeyTable, the stream-table join), or join two tables "
                "with app.table_join"
            )
        refuse_joined_input(app, topic, "another interval join")
        if topic in app.handlers:
            raise ValueError(
                f"input {topic!r} already has a processor function, so it cannot be an "
                "interval join's input too: the join's function is its function. Fix: remove "
                f"@app.processor({topic!r}) (or join another input)"
            )

    def register(function: J) -> J:
        join = name or function.__name__
        _new_join(app, join)
        spec = IntervalJoinSpec(join, left, right, *window, how, function, *types, *times)
        StoreSpec(spec.store, RawBytes)  # (a name a store may have: ValueError otherwise)
        stores = (spec.store, spec.timer_store)
        app.interval_joins[join] = spec
        app.timers[spec.timer_store] = TimerSpec(spec.timer_store, JoinExpiry(spec), stores)
        for side, topic, value_type, event_time in (
            ("l", left, types[0], times[0]),
            ("r", right, types[1], times[1]),
        ):
            side_function = JoinSide(spec, side)  # type: ignore[arg-type]
            app.processor(topic, value_type, stores, event_time=event_time)(side_function)
        return function

    return register


def declare_table_join(
    app: App, left: str, right: str, how: JoinType, name: str | None
) -> Callable[[T], T]:
    """``App.table_join``'s decorator: registers the decorated function for changes of the
    two tables (declared with ``App.table`` before or after)."""
    _check_how(how)
    if left == right:
        raise ValueError(f"table join of {left!r} with itself. Fix: join two tables")

    def register(function: T) -> T:
        join = name or function.__name__
        _new_join(app, join)
        app.table_joins[join] = TableJoinSpec(join, left, right, how, function)
        return function

    return register


def check_joins(app: App) -> None:
    """Raise ``ConfigError`` when a join's inputs are not the app's inputs (or, a table
    join's, not its tables), or when an app with an interval join does not apply its inputs
    in the canonical order."""
    config = app.config
    inputs = {t.topic for t in config.inputs}
    for spec in app.interval_joins.values():
        missing = sorted({spec.left, spec.right} - inputs)
        if missing:
            raise ConfigError(
                f"interval join {spec.name!r} joins {missing}, not input topics of app "
                f"{config.app_id!r}. Fix: add them under `inputs` in the config"
            )
        if config.time.input_order != "canonical":
            raise ConfigError(
                f"interval join {spec.name!r} of app {config.app_id!r} needs its inputs "
                f"applied in one order, and the app applies them in "
                f"{config.time.input_order!r} order: which records meet (and which are late) "
                "would depend on what arrived first, so replay, catch-up and a restart could "
                "match others. Fix: set `time: {input_order: canonical}` in the config"
            )
    for table_join in app.table_joins.values():
        missing = sorted({table_join.left, table_join.right} - set(app.tables))
        if missing:
            raise ConfigError(
                f"table join {table_join.name!r} joins {missing}, which are not tables of app "
                f"{config.app_id!r}. Fix: declare each with app.table(TOPIC, VALUE_TYPE) (and "
                "list it under `inputs` in the config)"
            )


def refuse_joined_input(app: App, topic: str, what: str) -> None:
    """Raise ``ValueError`` (naming the join and the fix) when ``topic`` is an input of one
    of ``app``'s interval joins, so that ``what`` cannot read it too."""
    for join in app.interval_joins.values():
        if topic in (join.left, join.right):
            raise ValueError(
                f"input {topic!r} is an input of interval join {join.name!r}, whose function "
                f"is the input's one function: {what} cannot read it too. Fix: remove the "
                f"{what} of {topic!r}, or read a copy of the topic (or join in {join.name!r})"
            )


def _check_how(how: str) -> None:
    if how not in _HOWS:
        raise ValueError(f"a join's how is one of {list(_HOWS)}, not {how!r}")


def _new_join(app: App, name: str) -> None:
    if name in app.interval_joins or name in app.table_joins:
        raise ValueError(f"join {name!r}: the name is declared twice. Fix: name=... another")
