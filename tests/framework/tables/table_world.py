"""A stream-and-table app whose state shows what each order read, records for it drawn so
that arrival and canonical orders differ, and a reference run of them (``TestDriver``).

Inputs ``customers`` (a table, listed first) and ``orders``, ``PARTITIONS`` each, keyed by
customer, ``time.input_order: canonical``, event time the Kafka timestamp. Each order appends
``"<order>:<region or ->@<time>,"`` to its key's ``seen`` state."""

from __future__ import annotations

import random

import orjson
from pydantic import BaseModel

from framework import App, AppConfig, KeyTable, Record
from framework.config import TopicConfig
from framework.config_time import TimeConfig
from framework.tables import table_store
from framework.testing import TestDriver
from rebalance import bucket, key_hash
from rebalance.positions import Position
from statestore import KeyState, ProcessorDatabase

INPUTS = ("customers", "orders")
PARTITIONS = 2
KEYS = [f"c{n}".encode() for n in range(4)]
#: one record as sent: (topic, key, event time, value: ``None`` for a tombstone)
Sent = tuple[str, bytes, int, bytes | None]


class Customer(BaseModel):
    """A customer."""

    region: str


class TimedCustomer(Customer):
    """A customer whose event time is its field ``at`` (``table_app(field_times=True)``)."""

    at: int


def table_app(history: int = 100, order: str = "canonical", *, field_times: bool = False) -> App:
    """The app (a new one each call), its table keeping ``history`` ms; with
    ``field_times`` both inputs' event times are their values' field ``at`` (records drawn
    with ``drawn(..., field_times=True)``), not their Kafka timestamps."""
    app = App(
        AppConfig(
            app_id="tables",
            inputs=[TopicConfig(topic=topic, partitions=PARTITIONS) for topic in INPUTS],
            outputs=[TopicConfig(topic="enriched", partitions=PARTITIONS)],
            initial_processors=1,
            time=TimeConfig(input_order=order),  # type: ignore[arg-type]
        )
    )
    at = "at" if field_times else None
    app.table(
        "customers", TimedCustomer if field_times else Customer, history=history, event_time=at
    )
    app.store("seen")

    @app.processor("orders", dict, stores=["customers", "seen"], event_time=at)
    def enrich(record: Record[dict[str, int]], state: dict[str, object]) -> None:
        """Note what the order read of its customer."""
        customers = state["customers"]
        seen = state["seen"]
        assert isinstance(customers, KeyTable) and isinstance(seen, KeyState)
        found = customers.get()
        region = found.region if found else "-"
        seen.set(f"{seen.get() or ''}{record.value['n']}:{region}@{record.timestamp},")

    return app


def drawn(seed: int, count: int, *, field_times: bool = False) -> list[Sent]:
    """``count`` records of both inputs in bursts of one, times rising with jitter (some
    late), a tenth of the customers' records tombstones. With ``field_times`` each value
    holds its event time as field ``at`` and is sent at a Kafka timestamp of another clock,
    far ahead and jittered (a tombstone's runs ahead of its key's values' times)."""
    rng = random.Random(seed)
    sent: list[Sent] = []
    clock = dict.fromkeys(INPUTS, 1000)
    orders = 0
    while len(sent) < count:
        topic = rng.choice(INPUTS)
        for _ in range(rng.randint(1, 4)):
            clock[topic] += rng.randint(0, 30)
            at = clock[topic] - rng.choice([0, 0, 0, 45])
            fields: dict[str, object] = {"at": at} if field_times else {}
            if topic == "orders":
                orders += 1
                value: bytes | None = orjson.dumps({"n": orders, **fields})
            elif rng.random() < 0.1:
                value = None
            else:
                value = orjson.dumps({"region": rng.choice(["north", "south", "east"]), **fields})
            sent_at = at + 10**9 + rng.randint(0, 5_000) if field_times else at
            sent.append((topic, rng.choice(KEYS), sent_at, value))
    return sent[:count]


def interleaved(sent: list[Sent], seed: int) -> list[Sent]:
    """``sent`` arriving in another interleaving of its topics (each topic's own order, and
    so each partition's, kept)."""
    rng = random.Random(seed)
    queues = {topic: [s for s in sent if s[0] == topic] for topic in INPUTS}
    out: list[Sent] = []
    while any(queues.values()):
        topic = rng.choice([t for t in INPUTS if queues[t]])
        out.append(queues[topic].pop(0))
    return out


def send(driver: TestDriver, sent: list[Sent]) -> TestDriver:
    """Send ``sent`` to ``driver``; the driver."""
    for topic, key, at, value in sent:
        driver.send(topic, key, value, timestamp=at)
    return driver


def home(topic: str, key: bytes) -> Position:
    """Where producers place ``key`` in ``topic``."""
    return topic, bucket(key_hash(key), PARTITIONS, PARTITIONS)


def ends_of(sent: list[Sent]) -> dict[Position, int]:
    """Each partition's end after ``sent``."""
    ends = {(topic, p): 0 for topic in INPUTS for p in range(PARTITIONS)}
    for topic, key, _at, _value in sent:
        ends[home(topic, key)] += 1
    return ends


def stored(database: ProcessorDatabase) -> dict[tuple[str, bytes], bytes]:
    """Every stored value of the app's stores, as stored (the keys in the stored layout)."""
    return {
        (store, bytes(key)): bytes(raw)
        for store in ("seen", table_store("customers"))
        for key, raw in database.backend.scan(store)
    }
