"""Found while reviewing tables (not a table defect; main had it since 817003a): two event
timers of one key, both due by the time a record of the key reaches, both fire (``TimeKeeper.fire``
looked the next one up in the clock it started with, which the first firing replaced)."""

from __future__ import annotations

from typing import Any

from framework import App, AppConfig, KeyState, Record, Timer
from framework.config import TopicConfig
from framework.testing import TestDriver


def _app() -> App:
    app = App(AppConfig(app_id="two-timers", inputs=[TopicConfig(topic="orders")]))
    app.store("seen")

    @app.timer("later", stores=["seen"])
    def fire(timer: Timer, seen: KeyState[str]) -> None:
        seen.set(f"{seen.get() or ''}{timer.name}@{timer.time},")

    @app.processor("orders", dict, stores=["seen", "later"])
    def order(record: Record[dict[str, int]], state: dict[str, Any]) -> None:
        state["later"].set((record.timestamp or 0) + 40, f"t{record.value['n']}")

    return app


def test_two_timers_due_at_one_record_both_fire() -> None:
    driver = TestDriver(_app())
    for n, at in [(1, 1_001), (2, 1_013), (3, 1_060)]:
        driver.send("orders", b"c3", {"n": n}, timestamp=at)
    assert driver.state("seen", b"c3") == "t1@1041,t2@1053,"
