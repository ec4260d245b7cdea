"""What an app with joins is refused, each refusal naming the fix: arrival order, a join
input that is a table (or no table, for a table join), unknown topics, and a Spark build of
an interval join."""

from __future__ import annotations

from typing import Any

import pytest

from framework import App, AppConfig, ConfigError, Output
from framework.bootstrap.build import check_orderable
from framework.bootstrap.errors import BootstrapError
from framework.config import TopicConfig
from framework.config_time import TimeConfig
from framework.testing import TestDriver
from tests.framework.joins.join_world import join_app


def _app(*inputs: str, order: str = "canonical") -> App:
    return App(
        AppConfig(
            app_id="refused",
            inputs=[TopicConfig(topic=topic) for topic in inputs],
            outputs=[TopicConfig(topic="out")],
            initial_processors=1,
            time=TimeConfig(input_order=order),  # type: ignore[arg-type]
        )
    )


def _join(app: App, left: str = "a", right: str = "b", **options: Any) -> None:
    @app.interval_join(left, right, before=10, **options)
    def joined(left: object, right: object) -> Output:
        return Output(b"")


def test_an_interval_join_in_arrival_order_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"set `time: \{input_order: canonical\}`"):
        TestDriver(join_app(order="arrival"))


def test_an_interval_join_of_topics_that_are_no_inputs_is_refused() -> None:
    app = _app("a", "c")
    _join(app)
    with pytest.raises(ConfigError, match=r"joins \['b'\], not input topics.*under `inputs`"):
        app.check()


def test_an_interval_join_input_that_is_a_table_is_refused_either_way_round() -> None:
    app = _app("a", "b")
    app.table("b")
    with pytest.raises(ValueError, match=r"'b' is a table.*KeyTable.*app.table_join"):
        _join(app)
    app = _app("a", "b")
    _join(app)
    with pytest.raises(ValueError, match="already has a processor function"):
        app.table("b")


def test_an_input_with_a_processor_cannot_be_joined_nor_a_join_input_get_one() -> None:
    app = _app("a", "b")

    @app.processor("a")
    def apply(record: object, state: object) -> None:
        return None

    with pytest.raises(ValueError, match=r"already has a processor function.*Fix: remove"):
        _join(app)
    app = _app("a", "b")
    _join(app)
    with pytest.raises(ValueError, match=r"input of interval join .*Fix: remove"):
        app.processor("b")(apply)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"how": "right"}, "how is one of"),
        ({"after": -1}, "interval join after must be zero or more"),
        ({"grace": -5}, "interval join grace must be zero or more"),
    ],
)
def test_a_join_badly_declared_is_refused(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _join(_app("a", "b"), "a", "b", **options)


def test_a_self_join_and_a_name_declared_twice_are_refused() -> None:
    with pytest.raises(ValueError, match="with itself"):
        _join(_app("a", "b"), "a", "a")
    app = _app("a", "b", "c", "d")
    _join(app)
    with pytest.raises(ValueError, match="declared twice"):
        _join(app, "c", "d")


def test_a_table_join_of_topics_that_are_no_tables_is_refused() -> None:
    app = _app("a", "b")
    app.table("a")

    @app.processor("b")
    def apply(record: object, state: object) -> None:
        return None

    @app.table_join("a", "b")
    def joined(record: object, left: object, right: object) -> None:
        return None

    with pytest.raises(ConfigError, match=r"joins \['b'\], which are not tables.*app.table"):
        app.check()


def test_a_spark_build_of_an_interval_join_is_refused_naming_the_fix() -> None:
    app = join_app()
    with pytest.raises(BootstrapError, match=r"interval join.*Fix: bootstrap: replay or snapshot"):
        check_orderable(app)
    app.configure(app.config.model_copy(update={"bootstrap": "spark"}))
    with pytest.raises(ConfigError, match=r"interval join\) yet.*Fix: bootstrap: snapshot"):
        app.check()
