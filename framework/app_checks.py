"""What ``App.check`` checks: that an app's config and its registered functions, stores,
tables and joins agree."""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework.config_errors import ConfigError
from framework.joins.declare import check_joins
from framework.repartition import check_repartitions
from framework.tables.checks import check_tables

if TYPE_CHECKING:
    from framework.app import App

__all__ = ["check_app"]

#: the handler key of a function registered for every input topic (``framework.app``'s)
_ANY_TOPIC = "*"


def check_app(app: App) -> None:
    """Raise ``ConfigError`` when the config and the registered functions disagree (see
    ``App.check``)."""
    check_joins(app)
    check_tables(app)
    check_repartitions(app)
    inputs = {t.topic for t in app.config.inputs}
    missing = [] if _ANY_TOPIC in app.handlers else sorted(inputs - set(app.handlers))
    if missing:
        raise ConfigError(
            f"input topics without a processor function: {missing}. Fix: register one "
            "with @app.processor(TOPIC) or remove the topic from `inputs`."
        )
    extra = sorted(set(app.handlers) - inputs - {_ANY_TOPIC})
    if extra:
        raise ConfigError(
            f"processor functions for topics that are not inputs: {extra}. Fix: add them "
            "under `inputs` in the config."
        )
    usable = {*app.stores, *app.windows, *app.timers, *app.tables}
    usable |= {spec.store for spec in app.interval_joins.values()}
    users = [(f"processor for {h.topic!r}", h.stores) for h in app.handlers.values()]
    users += [(f"timer store {t.name!r}", t.stores) for t in app.timers.values()]
    for who, names in users:
        for name in names:
            if name not in usable:
                raise ConfigError(
                    f"{who} uses store {name!r}, which is not declared. Fix: "
                    f"app.store({name!r}) (or windows_store / timer)."
                )
    config = app.config
    if (
        config.bootstrap == "spark"
        and config.time.input_order == "canonical"
        and len(config.inputs) > 1
        and app.uses_time
    ):
        raise ConfigError(
            "bootstrap: spark cannot build an app that orders its inputs canonically "
            "(time.input_order: canonical) and keeps time (windows, timers, a ttl or an "
            "interval join) yet: "
            "every joining processor's build would be refused. Fix: bootstrap: snapshot or "
            "replay"
        )
    outputs = {t.topic for t in app.config.outputs}
    for spec in app.windows.values():
        if spec.to is None and len(outputs) != 1:
            raise ConfigError(
                f"window store {spec.name!r} has no output topic and the app has "
                f"{len(outputs)}: {sorted(outputs)}. Fix: windows_store(..., to=TOPIC)."
            )
        if spec.to is not None and spec.to not in outputs:
            raise ConfigError(
                f"window store {spec.name!r} emits to {spec.to!r}, which is not an output "
                "topic. Fix: add it under `outputs` in the config."
            )
