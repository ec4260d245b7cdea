"""What an app with tables must be configured with (``App.check``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework.config_errors import ConfigError

if TYPE_CHECKING:
    from framework.app import App

__all__ = ["check_tables", "refuse_table_processor"]


def check_tables(app: App) -> None:
    """Raise ``ConfigError`` when a table's topic is not an input, or when an app with a
    table and another input does not apply its inputs in the canonical order (a table
    record's place among the other input's records would depend on arrival)."""
    if not app.tables:
        return
    config = app.config
    inputs = [t.topic for t in config.inputs]
    missing = sorted(set(app.tables) - set(inputs))
    if missing:
        raise ConfigError(
            f"table(s) {missing} are not input topics of app {config.app_id!r}: a table is "
            "fed by one of the app's inputs. Fix: add them under `inputs` in the config"
        )
    if len(inputs) > 1 and config.time.input_order != "canonical":
        raise ConfigError(
            f"app {config.app_id!r} has table(s) {sorted(app.tables)} and other inputs, and "
            f"applies its inputs in {config.time.input_order!r} order: which table version a "
            "record reads would depend on what arrived first, so replay, catch-up and Spark "
            "could read another. Fix: set `time: {input_order: canonical}` in the config"
        )


def refuse_table_processor(app: App, topic: str) -> None:
    """Raise ``ValueError`` when ``topic`` is one of ``app``'s tables: a table's records
    upsert it, no processor function runs for them (``@app.processor`` for it is refused)."""
    if topic in app.tables:
        raise ValueError(
            f"input {topic!r} is a table (app.table): its records only upsert the key's "
            f"value, no processor function runs for them. Fix: remove @app.processor({topic!r}) "
            f"and list {topic!r} in the stores of another input's function to read it (KeyTable)"
        )
