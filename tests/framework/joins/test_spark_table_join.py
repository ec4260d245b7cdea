"""A Spark build of a table-join app (two tables, ``time.input_order: canonical``, no other
time kept) builds the state the live loop holds (``TestDriver``): the join keeps no state of
its own, and a change its function refused (a dead letter) is left out of both alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from framework import App, AppConfig, Output, Record
from framework.bootstrap import BuildRequest
from framework.bootstrap.build import build_state, check_orderable
from framework.config import TopicConfig
from framework.config_time import TimeConfig
from framework.coordination.registry import TopicEntry
from framework.tables import table_store
from framework.testing import TestDriver
from rebalance import TopicHistory
from rebalance.positions import OffsetRange
from statestore import DatabaseIdentity, ProcessorDatabase
from tests.framework.tables.table_world import (
    INPUTS,
    PARTITIONS,
    Customer,
    drawn,
    ends_of,
    interleaved,
    send,
)
from tests.framework.tables.test_spark_tables import archive


def joined_app() -> App:
    """Both inputs of ``table_world`` as tables, joined; the function refuses order 7."""
    app = App(
        AppConfig(
            app_id="tables",
            inputs=[TopicConfig(topic=topic, partitions=PARTITIONS) for topic in INPUTS],
            outputs=[TopicConfig(topic="enriched", partitions=PARTITIONS)],
            initial_processors=1,
            time=TimeConfig(input_order="canonical"),
            on_error="dead-letter",
        )
    )
    app.table("customers", Customer, history=100)
    app.table("orders", dict)

    @app.table_join("customers", "orders", how="outer")
    def both(record: Record[Any], customer: Customer | None, order: Any) -> Output:
        if order is not None and order["n"] == 7:
            raise ValueError("order 7 is refused")
        return Output({"region": customer and customer.region, "order": order})

    return app


def stored(database: ProcessorDatabase) -> dict[tuple[str, bytes], bytes]:
    return {
        (store, bytes(key)): bytes(raw)
        for store in (table_store("customers"), table_store("orders"))
        for key, raw in database.backend.scan(store)
    }


@pytest.mark.spark
def test_the_build_holds_the_live_state_of_a_table_join(
    spark: SparkSession, tmp_path: Path
) -> None:
    sent = drawn(seed=5, count=150)
    check_orderable(joined_app())  # (it keeps no time: Spark may build it)
    lives = [
        send(TestDriver(joined_app(), on_error="dead-letter"), arrival)
        for arrival in (sent, interleaved(sent, 6))
    ]
    expected = stored(lives[0].database)
    assert stored(lives[1].database) == expected
    assert any(letter.stage == "processor" for letter in lives[0].dead_letters)
    ranges = {position: OffsetRange(0, end) for position, end in ends_of(sent).items()}
    request = BuildRequest(
        processors=1,
        covers={0: list(ranges)},
        ranges=ranges,
        retained=dict(ranges),
        entries={topic: TopicEntry(TopicHistory(topic, (PARTITIONS,))) for topic in INPUTS},
        archive=archive(sent, tmp_path / "archive"),
    )
    manifest = build_state(joined_app(), request, tmp_path / "built", spark=spark)
    app = joined_app()
    database = ProcessorDatabase.open(
        tmp_path / "db", DatabaseIdentity(app.config.app_id, 0), app.store_specs()
    )
    try:
        target = manifest.targets[0]
        database.bulk_load(manifest.files(0), target.offsets, progress=target.progress())
        assert stored(database) == expected
        assert database.offsets() == lives[0].offsets()
    finally:
        database.close()
