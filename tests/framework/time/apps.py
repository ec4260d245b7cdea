"""Shared pieces of the time tests: a config, a driver's outputs by key, a key's time record."""

from __future__ import annotations

from typing import Any

import orjson

from framework import App, AppConfig
from framework.testing import TestDriver
from framework.time.key_clock import TIME_STORE, KeyClock


def config(partitions: int = 2, outputs: tuple[str, ...] = ("out",), **more: Any) -> AppConfig:
    """An app config with input ``in`` (and any ``inputs=`` given) and ``outputs``."""
    base: dict[str, Any] = {
        "app_id": "time-unit",
        "inputs": [{"topic": "in", "partitions": partitions}],
        "outputs": [{"topic": topic, "partitions": 2} for topic in outputs],
        "initial_processors": 1,
    }
    base.update(more)
    return AppConfig.load(None, **base)


def new_app(**more: Any) -> App:
    """An app with ``config(**more)``."""
    return App(config(**more))


def emitted(driver: TestDriver, topic: str | None = None) -> list[tuple[bytes, Any]]:
    """``(key, value)`` of every output to ``topic``, in order (values parsed as JSON)."""
    return [
        (o.key, None if o.value is None else orjson.loads(o.value)) for o in driver.outputs(topic)
    ]


def clock_of(driver: TestDriver, key: bytes) -> KeyClock:
    """The committed time record of ``key``."""
    return KeyClock.decode(driver.state(TIME_STORE, key))


def stages(driver: TestDriver) -> list[str]:
    """The stages of the driver's dead letters, in order."""
    return [letter.stage for letter in driver.dead_letters]
