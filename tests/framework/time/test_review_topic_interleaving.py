"""Review: README (Time): "Nothing that changes state depends on the wall clock, on other keys
or on how partitions interleave". A key of an app with two input topics lives in a partition
of each, and its time is the largest event time of its records of both (``KeyClock.time``):
which of its windows a record finds closed depends on how the two partitions' records
interleave, which the live loop takes as fetched, and a restart, a catch-up or the Spark build
(topic by topic, in config order) may take otherwise. Still so with ``time.input_order:
arrival`` (the default); with ``canonical`` the records are applied in each key's canonical
order (``framework.order``), whichever order they were sent in."""

from __future__ import annotations

from typing import Any, Literal

import pytest

from framework import App, AppConfig, Record
from framework.testing import TestDriver
from framework.time import Collect, KeyWindows, Tumbling
from tests.framework.time.apps import emitted, stages


def make_app(order: Literal["arrival", "canonical"]) -> App:
    config = AppConfig.load(
        None,
        app_id="two-inputs",
        time={"input_order": order},
        inputs=[{"topic": "clicks", "partitions": 1}, {"topic": "views", "partitions": 1}],
        outputs=[{"topic": "out", "partitions": 1}],
        initial_processors=1,
    )
    app = App(config)
    app.windows_store("w", Tumbling(10), Collect())

    @app.processor(stores=["w"])
    def add(record: Record[bytes], windows: KeyWindows) -> None:
        windows.add(record.topic)

    return app


def run(
    order: list[tuple[str, int]], input_order: Literal["arrival", "canonical"]
) -> tuple[list[Any], list[str]]:
    """Each partition's records in the same order; ``order`` interleaves the two."""
    driver = TestDriver(make_app(input_order))
    for topic, at in order:
        driver.send(topic, b"k", b"", timestamp=at)
    driver.advance_time(1_000)
    return emitted(driver), stages(driver)


@pytest.mark.parametrize(
    "input_order",
    [
        pytest.param(
            "arrival",
            marks=pytest.mark.xfail(
                strict=True,
                reason="a key's time spans its input topics: results depend on how they "
                "interleave (input_order: arrival)",
            ),
        ),
        "canonical",
    ],
)
def test_a_keys_results_do_not_depend_on_how_its_topics_interleave(
    input_order: Literal["arrival", "canonical"],
) -> None:
    clicks_first = run([("clicks", 25), ("views", 5)], input_order)  # views' record is late?
    views_first = run([("views", 5), ("clicks", 25)], input_order)  # views' record in [0, 10)
    assert clicks_first == views_first
