"""The Spark fold runs the app's own processor function: same state as the test driver."""

from __future__ import annotations

import json
import random
from typing import Any

import pyarrow as pa
from pyspark import cloudpickle

from examples.balances.app import Balance
from examples.balances.app import app as balances_app
from framework import AppConfig
from framework.bootstrap.fold import AppFold
from framework.testing import TestDriver
from statestore import TypedCodec
from statestore.key_layout import KeyLayout


def transactions(count: int) -> list[tuple[bytes, bytes]]:
    rng = random.Random(7)
    records = []
    for _ in range(count):
        account = f"acc-{rng.randrange(20)}"
        kind = "deposit" if rng.random() < 0.5 else "withdrawal"
        value = json.dumps({"account": account, "kind": kind, "amount": rng.randrange(1, 90)})
        records.append((account.encode(), value.encode() if rng.random() > 0.02 else b"{bad"))
    return records


def test_fold_equals_the_driver_including_refused_and_invalid_records() -> None:
    config = AppConfig.load(balances_app.config_file)
    records = transactions(3000)
    driver = TestDriver(balances_app, config, on_error="dead-letter")
    for key, value in records:
        driver.send("transactions", key, value)
    table = records_table(
        [
            ("transactions", 0, offset, key, value, 1_700_000_000_000, None)
            for offset, (key, value) in enumerate(records)
        ]
    )
    items = list(AppFold(balances_app, initial_processors=3)(table))
    assert {store for store, _, _ in items} == {"accounts"}
    codec = TypedCodec(Balance)
    layout = KeyLayout(3)
    folded = {layout.user(key): codec.decode(raw) for _, key, raw in items}
    assert [key for _, key, _ in items] == sorted(layout.stored(k) for k in folded)
    expected = {key: driver.state("accounts", key) for key, _ in records}
    assert folded == {k: v for k, v in expected.items() if v is not None}
    reasons = {d.reason.split(":")[0] for d in driver.dead_letters}
    assert {"InsufficientFundsError", "ValidationError"} <= reasons  # refused here and there


def test_fold_survives_shipping_to_spark_workers() -> None:
    fold = AppFold(balances_app)
    list(fold(records_table([])))
    shipped = cloudpickle.dumps(fold)  # type: ignore[no-untyped-call]  # as Spark ships code
    copy = cloudpickle.loads(shipped)
    assert copy.app.config.app_id == balances_app.config.app_id


HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("timestamp", pa.int64()),
        ("headers", HEADERS),
    ]
)
Row = tuple[str, int, int, bytes | None, bytes | None, int | None, list[dict[str, Any]] | None]


def records_table(rows: list[Row]) -> pa.Table:
    """Records as the Spark job hands them to a fold."""
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(SCHEMA)
    return pa.table(
        [pa.array(list(c), f.type) for c, f in zip(columns, SCHEMA, strict=True)], schema=SCHEMA
    )
