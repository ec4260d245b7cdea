"""examples/payments on the real broker (``tests/integration/apps/payments.py``): every
payment is matched to the orders of its key within 10 minutes before it, exactly as an
oracle applying what the two topics hold (the processor's ticks and forced ticks included)
in the canonical order computes, each output once under exactly-once through a SIGKILL and
the restart; payments no order can match any more are written alone, late orders are
dropped."""

from __future__ import annotations

import os
import signal
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest

from examples.payments.app import GRACE, WITHIN
from framework.order import NO_FLOOR, Item, canonical_order
from framework.producer import SplitstateProducer
from framework.time.ticks import TICK_HEADER, TickRead, read_tick
from rebalance import bucket, key_hash
from tests.integration.compacted_reads import Read, read_topic
from tests.integration.harness import Supervised, create_app, unique, wait_for

pytestmark = pytest.mark.integration

APP = "tests.integration.apps.payments:app"
PARTITIONS = 2
KEYS = [f"order-{i}".encode() for i in range(6)]
MINUTE = 60_000
GRACE_MS = int(GRACE.total_seconds() * 1000)
BEFORE = int(WITHIN.total_seconds() * 1000)


def _produce(bootstrap: str, topic: str, records: list[tuple[bytes, dict[str, object]]]) -> None:
    producer = SplitstateProducer({"bootstrap.servers": bootstrap}, [topic])
    for key, value in records:
        producer.produce(topic, key, orjson.dumps(value))
    assert producer.close(60) == 0


class _Key:
    """One key's time and buffered records in the oracle (as ``framework.joins`` keeps
    them)."""

    def __init__(self) -> None:
        self.time = NO_FLOOR
        self.sides: dict[int, list[list[Any]]] = {0: [], 1: []}  # [time, read, matched]

    def due(self) -> int | None:
        closes = [self.closes(side, e[0]) for side, items in self.sides.items() for e in items]
        return min(closes) + 1 if closes else None

    @staticmethod
    def closes(side: int, t: int) -> int:
        return t + (0 if side == 0 else BEFORE) + GRACE_MS

    def expire(self) -> list[Read]:
        """Drop what the key's time passed; the payments that matched nothing."""
        gone = []
        for side in (0, 1):
            kept = []
            for index, entry in enumerate(self.sides[side]):
                closes = self.closes(side, entry[0])
                if closes < self.time:
                    gone.append((closes, side, index, entry))
                else:
                    kept.append(entry)
            self.sides[side] = kept
        gone.sort(key=lambda g: g[:3])
        return [entry[1] for _c, side, _i, entry in gone if side == 0 and not entry[2]]


def _row(payment: Read, order: Read | None) -> dict[str, object]:
    paid = orjson.loads(payment.value or b"")
    due = None if order is None else orjson.loads(order.value or b"")
    return {
        "payment_id": paid["payment_id"],
        "order_id": due["order_id"] if due else None,
        "paid": float(paid["amount"]),
        "due": float(due["amount"]) if due else None,
        "paid_at": payment.timestamp,
        "ordered_at": order.timestamp if order else None,
    }


def _items(payments: list[Read], orders: list[Read], app_id: str) -> list[Item[Read]]:
    """Both topics' records and the app's ticks, with their marks (as ``framework.order``)."""
    items: list[Item[Read]] = []
    for index, records in enumerate((payments, orders)):
        marks: dict[int, int] = defaultdict(lambda: NO_FLOOR)
        for read in sorted(records, key=lambda r: (r.partition, r.offset)):
            at: int | None = None
            if TICK_HEADER in read.headers:
                tick = read_tick([(TICK_HEADER, read.headers[TICK_HEADER])])
                if isinstance(tick, TickRead) and tick.applies_to(app_id):
                    at = tick.floor
            elif read.key is not None and read.value:
                at = int(orjson.loads(read.value)["at"])
            if at is not None:
                marks[read.partition] = max(marks[read.partition], at)
            items.append(Item((str(index), read.partition), read.offset, read.key, at,
                              marks[read.partition], index, 0, read))  # fmt: skip
    return items


def _tick(keys: dict[bytes, _Key], partition: int, floor: int, out: dict[bytes, list[Any]]) -> None:
    """A tick: the keys of its partition with something due by its floor take the floor."""
    for key in KEYS:
        state = keys[key]
        due = state.due()
        home = bucket(key_hash(key), PARTITIONS, PARTITIONS)
        if home == partition and due is not None and due <= floor:
            state.time = max(state.time, floor)
            out[key] += [_row(alone, None) for alone in state.expire()]


def _expected(payments: list[Read], orders: list[Read], app_id: str) -> dict[bytes, list[Any]]:
    """Each key's outputs: both topics applied in their canonical order, ticks included."""
    keys: dict[bytes, _Key] = defaultdict(_Key)
    out: dict[bytes, list[Any]] = defaultdict(list)
    for item in canonical_order(_items(payments, orders, app_id)):
        read, key = item.payload, item.payload.key
        if item.event_time is None:
            continue  # (another app's tick)
        if TICK_HEADER in read.headers:
            _tick(keys, read.partition, item.event_time, out)
            continue
        assert key is not None and read.value
        state, t, side = keys[key], item.event_time, item.input
        now = max(state.time, t)
        if t + GRACE_MS < now:
            continue  # late: a dead letter, nothing changes
        state.time = now
        out[key] += [_row(alone, None) for alone in state.expire()]
        entry = [t, read, False]
        for waiting in state.sides[1 - side]:
            left, right = (t, waiting[0]) if side == 0 else (waiting[0], t)
            if left - BEFORE <= right <= left:
                waiting[2] = entry[2] = True
                pair = (read, waiting[1]) if side == 0 else (waiting[1], read)
                out[key].append(_row(*pair))
        state.sides[side].append(entry)
    return {key: rows for key, rows in out.items() if rows}


def test_payments_are_matched_to_their_orders_exactly_on_the_broker(
    tmp_path: Path, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = unique("joins") + "-"
    monkeypatch.setenv("PAYMENTS_TOPIC_PREFIX", prefix)  # (the app's topics, in every process)
    payments, orders, out = f"{prefix}payments", f"{prefix}orders", f"{prefix}matched"
    app_id = f"{prefix}app"
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
        app_id=app_id,
        inputs=[
            {"topic": payments, "partitions": PARTITIONS},
            {"topic": orders, "partitions": PARTITIONS},
        ],
        outputs=[{"topic": out, "partitions": PARTITIONS}],
        initial_processors=1,
        processing_guarantee="exactly-once",
        batch={"max_records": 20, "max_wait_ms": 50, "in_flight": 2},
        time={"input_order": "canonical", "max_input_wait": 5},
        snapshots={"enabled": False},
        bootstrap="replay",
    )

    def order(key: bytes, n: int, at: int) -> tuple[bytes, dict[str, object]]:
        return key, {"order_id": f"{key.decode()}-o{n}", "amount": n, "at": at}

    def payment(key: bytes, n: int, at: int) -> tuple[bytes, dict[str, object]]:
        return key, {"payment_id": f"{key.decode()}-p{n}", "amount": n, "at": at}

    # per key: orders at 0 and 30 min; payments at 5 (matches), 20 (none), 31 and 35 min
    _produce(kafka_bootstrap, orders, [order(k, n, 30 * n * MINUTE) for n in (0, 1) for k in KEYS])
    _produce(
        kafka_bootstrap,
        payments,
        [payment(k, n, m * MINUTE) for n, m in enumerate((5, 20, 31, 35)) for k in KEYS],
    )
    runner = Supervised(APP, config, tmp_path / "state", tmp_path / "log")
    try:
        wait_for(lambda: 0 in runner.pids(), 60, "the processor to start")
        wait_for(lambda: len(read_topic(kafka_bootstrap, out, PARTITIONS)) >= len(KEYS), 120,
                 "outputs")  # fmt: skip
        os.kill(runner.pids()[0], signal.SIGKILL)  # (its state and the merge rebuilt)
        first = runner.pids().get(0)
        wait_for(lambda: runner.pids().get(0) not in (None, first), 60, "the restart")
        time.sleep(3)  # (the restarted processor reads its inputs again)
        # a late order (2 min, far behind 35), an order at 45 and its payment at 50, and a
        # payment at 500 min on each key: what is buffered before expires
        later = [order(k, n, m * MINUTE) for n, m in ((2, 2), (3, 45)) for k in KEYS]
        _produce(kafka_bootstrap, orders, later)
        later = [payment(k, n, m * MINUTE) for n, m in ((4, 50), (5, 500)) for k in KEYS]
        _produce(kafka_bootstrap, payments, later)

        def done() -> bool:
            expected = _expected(
                read_topic(kafka_bootstrap, payments, PARTITIONS),
                read_topic(kafka_bootstrap, orders, PARTITIONS),
                app_id,
            )
            total = sum(len(rows) for rows in expected.values())
            return len(read_topic(kafka_bootstrap, out, PARTITIONS)) >= total

        wait_for(done, 120, "every output")
        time.sleep(2)  # (nothing more may come: each once)
    finally:
        assert runner.stop() == 0, runner.output()[-3000:]
    emitted: dict[bytes, list[Any]] = defaultdict(list)
    for read in sorted(
        read_topic(kafka_bootstrap, out, PARTITIONS), key=lambda r: (r.partition, r.offset)
    ):
        assert read.key is not None and read.value is not None
        emitted[read.key].append(orjson.loads(read.value))
    expected = _expected(
        read_topic(kafka_bootstrap, payments, PARTITIONS),
        read_topic(kafka_bootstrap, orders, PARTITIONS),
        app_id,
    )
    assert dict(emitted) == expected
    ids = [(row["payment_id"][-2:], row["order_id"] and row["order_id"][-2:])
           for row in emitted[KEYS[1]]]  # fmt: skip
    assert ids == [("p0", "o0"), ("p1", None), ("p2", "o1"), ("p3", "o1"), ("p4", "o3")]
